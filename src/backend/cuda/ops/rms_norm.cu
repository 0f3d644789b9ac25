#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/reduce.cuh"
#include "backend/cuda/ops/rms_norm.cuh"

namespace df::cuda {
namespace {

// One warp per row; 8 rows per block of 256 threads.
__global__ void rms_norm_kernel(const float* x, int64_t xs, const float* w, float eps, float* y, int64_t ys,
                                int64_t rows, int64_t cols) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= rows) return;
  const float* xr = x + r * xs;
  float* yr = y + r * ys;
  float sum = 0.0f;
  for (int64_t i = lane; i < cols; i += 32) sum += xr[i] * xr[i];
  sum = warp_sum(sum);
  const float scale = rsqrtf(sum / static_cast<float>(cols) + eps);
  for (int64_t i = lane; i < cols; i += 32) yr[i] = (xr[i] * scale) * w[i];
}

}  // namespace

void launch_rms_norm(const float* x, int64_t x_stride, const float* w, float eps, float* y, int64_t y_stride,
                     int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows == 0) return;
  rms_norm_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, s>>>(x, x_stride, w, eps, y, y_stride, rows, cols);
  launch_check("rms_norm");
}

}  // namespace df::cuda
