#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/argmax.cuh"

namespace df::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void better(float& v, int32_t& i, float v2, int32_t i2) {
  if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
}

// One block per row.
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int64_t xs, int64_t cols, int32_t* out) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * xs;
  float v = -INFINITY;
  int32_t idx = INT32_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) better(v, idx, xr[c], static_cast<int32_t>(c));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(v, idx, v2, i2);
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = v, si[warp] = idx;
  __syncthreads();
  if (warp != 0) return;
  v = sv[lane], idx = si[lane];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(v, idx, v2, i2);
  }
  if (lane == 0) out[blockIdx.x] = idx == INT32_MAX ? 0 : idx;
}

}  // namespace

void launch_argmax(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s) {
  if (rows == 0) return;
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, x_stride, cols, out);
  launch_check("argmax");
}

}  // namespace df::cuda
