// The generic kernels over raw ggml blocks (any format struct of dev_raw_*.cuh):
//   mv_raw<F, N>:  y[j, r] = sum_c W[r, c] x[j, c], one warp per output row. Lane l takes
//                  the parts t = l, l + 32, ... of the row in order, dequantizes each part
//                  exactly and accumulates w * x with FMAs into one f32 sum per x row; the
//                  32 lane sums are combined by a fixed butterfly. Nothing in a row's
//                  arithmetic depends on N, so results are bit-identical for every n.
//   get_rows_raw<F>: exact dequantization of whole rows.
#pragma once
#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"

namespace df::cudamv {

constexpr int kRawWarps = 4;  // warps (= rows) per block of mv_raw

// Sum over the warp, the same butterfly for every caller (all lanes end with the sum).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <class F, int N>
__global__ void __launch_bounds__(kRawWarps * 32)
    mv_raw(const uint8_t* __restrict__ W, size_t row_bytes, int64_t rows, int64_t cols,
           const DevTables* __restrict__ T, const float* __restrict__ x, float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t{blockIdx.x} * kRawWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const uint8_t* wr = W + row * row_bytes;
  const int nparts = static_cast<int>(cols / F::kPartElems);
  float acc[N];
#pragma unroll
  for (int j = 0; j < N; ++j) acc[j] = 0.0f;
#pragma unroll 2
  for (int t = lane; t < nparts; t += 32) {
    float w[F::kPartElems];
    F::dequant(wr + static_cast<int64_t>(t / F::kParts) * F::kBlockBytes, t % F::kParts, T, w);
    const float* xp = x + static_cast<int64_t>(t) * F::kPartElems;
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int i = 0; i < F::kPartElems; i += 4) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(xp + j * cols + i));
        acc[j] = fmaf(w[i], xv.x, acc[j]);
        acc[j] = fmaf(w[i + 1], xv.y, acc[j]);
        acc[j] = fmaf(w[i + 2], xv.z, acc[j]);
        acc[j] = fmaf(w[i + 3], xv.w, acc[j]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float s = warp_sum(acc[j]);
    if (lane == 0) y[j * rows + row] = s;
  }
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
