#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/reduce.cuh"
#include "backend/cuda/ops/rms_norm.cuh"

namespace df::cuda {
namespace {

// Many short rows (per-head norms, batches): one warp per row, 8 rows per block.
__global__ void rms_norm_warp_kernel(const float* x, int64_t xs, const float* w, float eps, float* y, int64_t ys,
                                     int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  pdl_wait();
  pdl_trigger();
  if (r >= rows) return;
  const float* xr = x + r * xs;
  float* yr = y + r * ys;
  // The order of the matvec's fused norm prologue (activations.cuh): the same bits.
  const float scale = rms_scale_of(static_cast<int>(cols), eps, [&](int c) { return xr[c]; });
  for (int64_t i = lane; i < cols; i += 32) yr[i] = rms_apply(xr[i], scale, w[i]);
}

// Few long rows (the residual stream at decode): one block of 256 threads per row.
constexpr int kBlock = 256;
__global__ void __launch_bounds__(kBlock) rms_norm_block_kernel(const float* x, int64_t xs, const float* w, float eps,
                                                                float* y, int64_t ys, int64_t cols) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * xs;
  float* yr = y + static_cast<int64_t>(blockIdx.x) * ys;
  pdl_wait();
  pdl_trigger();
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += kBlock) sum += xr[i] * xr[i];
  sum = warp_sum(sum);
  __shared__ float part[kBlock / 32];
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = sum;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kBlock / 32; ++i) total += part[i];
  const float scale = rsqrtf(total / static_cast<float>(cols) + eps);
  for (int64_t i = threadIdx.x; i < cols; i += kBlock) yr[i] = (xr[i] * scale) * w[i];
}

}  // namespace

void launch_rms_norm(const float* x, int64_t x_stride, const float* w, float eps, float* y, int64_t y_stride,
                     int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  if (rows == 0) return;
  if (cols >= 512 && rows < 132) {
    launch_kernel(rms_norm_block_kernel, dim3(static_cast<unsigned>(rows)), dim3(kBlock), 0, s, pdl, x, x_stride, w,
                  eps, y, y_stride, cols);
  } else {
    launch_kernel(rms_norm_warp_kernel, dim3(static_cast<unsigned>((rows + 7) / 8)), dim3(256), 0, s, pdl, x, x_stride,
                  w, eps, y, y_stride, rows, cols);
  }
  launch_check("rms_norm");
}

void launch_rms_norm_rows(const float* x, int64_t x_stride, const float* w, float eps, float* y, int64_t y_stride,
                          int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  if (rows == 0) return;
  launch_kernel(rms_norm_warp_kernel, dim3(static_cast<unsigned>((rows + 7) / 8)), dim3(256), 0, s, pdl, x, x_stride, w,
                eps, y, y_stride, rows, cols);
  launch_check("rms_norm_rows");
}

}  // namespace df::cuda
