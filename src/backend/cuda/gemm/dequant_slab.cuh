// Internal: a slab of a weight dequantized to dense f16 (the cuBLAS path of gemm_blas.cu),
// through the same weight sources as the tile kernel (gemm_kernel.cuh: the formats of matvec/).
//
//   out[r, c] = f16(W[sr.r0 + r, sr.c0 + c])   r < sr.nr, c < sr.nc   (out dense, stride nc)
//
// One thread per part (kPE consecutive elements of a row): part loads are 16-byte words,
// consecutive threads read consecutive words of a plane and write consecutive halfs.
// sr.c0 and sr.nc are multiples of 64 (every format's part divides 64).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/gemm_kernel.cuh"

namespace df::cuda::gemm {

template <class S>
__global__ void __launch_bounds__(256) dequant_slab_kernel(PlanarView v, SlabRange sr, __half* __restrict__ out) {
  constexpr int kPE = S::kPE;
  const int64_t parts = sr.nc / kPE, total = sr.nr * parts, p0 = sr.c0 / kPE;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / parts, t = i - r * parts;
    typename S::Regs regs;
    S::load(v, sr.r0 + r, static_cast<int>(p0 + t), regs);
    float w[kPE];
    S::dequant(v, regs, w);
    __half* dst = out + r * sr.nc + t * kPE;
    if constexpr (kPE % 8 == 0) {
#pragma unroll
      for (int j = 0; j < kPE; j += 8) {
        uint4 u;
        u.x = pack_half2(w[j], w[j + 1]);
        u.y = pack_half2(w[j + 2], w[j + 3]);
        u.z = pack_half2(w[j + 4], w[j + 5]);
        u.w = pack_half2(w[j + 6], w[j + 7]);
        *reinterpret_cast<uint4*>(dst + j) = u;
      }
    } else {
      static_assert(kPE == 4, "part size");
      uint2 u;
      u.x = pack_half2(w[0], w[1]);
      u.y = pack_half2(w[2], w[3]);
      *reinterpret_cast<uint2*>(dst) = u;
    }
  }
}

// The dequantizer of W's type among Ss; false when none matches.
template <class... Ss>
bool dequant_list(SourceList<Ss...>, GgmlType t, const PlanarView& v, SlabRange sr, __half* out, cudaStream_t s) {
  const int64_t threads = sr.nr * sr.nc / 32;  // at 32 elements a part (grid-stride loop)
  const unsigned blocks = static_cast<unsigned>(threads / 256 + 1 < 132 * 8 ? threads / 256 + 1 : 132 * 8);
  const bool found =
      ((Ss::kType == t ? (dequant_slab_kernel<Ss><<<blocks, 256, 0, s>>>(v, sr, out), true) : false) || ...);
  if (found) check_launch_gemm("dequant_slab");
  return found;
}

}  // namespace df::cuda::gemm
