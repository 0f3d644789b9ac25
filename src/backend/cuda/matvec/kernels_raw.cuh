// get_rows over raw ggml blocks (any format struct of dev_raw_*.cuh): exact dequantization
// of whole rows; and the warp reduction shared with the matvec kernel (kernels_fast.cuh).
#pragma once
#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"

namespace df::cudamv {

// Sum over the warp, the same butterfly for every caller (all lanes end with the sum).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// One block per (id, slice of parts); out-of-range ids give NaN rows.
template <class F>
__global__ void get_rows_raw(const uint8_t* __restrict__ W, size_t row_bytes, int64_t rows,
                             int64_t cols, const DevTables* __restrict__ T,
                             const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int32_t id = ids[blockIdx.y];
  float* o = out + int64_t{blockIdx.y} * cols;
  const int nparts = static_cast<int>(cols / F::kPartElems);
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < nparts; t += gridDim.x * blockDim.x) {
    float w[F::kPartElems];
    if (id >= 0 && id < rows) {
      F::dequant(W + id * row_bytes + static_cast<int64_t>(t / F::kParts) * F::kBlockBytes, t % F::kParts, T, w);
    } else {
#pragma unroll
      for (int i = 0; i < F::kPartElems; ++i) w[i] = __int_as_float(0x7fc00000);
    }
#pragma unroll
    for (int i = 0; i < F::kPartElems; i += 4)
      *reinterpret_cast<float4*>(o + static_cast<int64_t>(t) * F::kPartElems + i) = make_float4(w[i], w[i + 1], w[i + 2], w[i + 3]);
  }
}

}  // namespace df::cudamv
