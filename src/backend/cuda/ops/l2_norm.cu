#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/l2_norm.cuh"
#include "backend/cuda/ops/launch.cuh"

namespace df::cuda {
namespace {

// One warp per (row, group); 8 warps per block.
__global__ void l2_norm_kernel(const float* x, int64_t xs, float* y, int64_t ys, int64_t rows, int64_t n_groups,
                               int64_t group, float eps) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  pdl_wait();
  pdl_trigger();
  if (w >= rows * n_groups) return;
  const int64_t r = w / n_groups, g = w % n_groups;
  const float* a = x + r * xs + g * group;
  float* b = y + r * ys + g * group;
  const float inv = l2_inv_of(static_cast<int>(group), eps, [&](int i) { return a[i]; });  // as the fused conv's
  for (int64_t i = lane; i < group; i += 32) b[i] = a[i] * inv;
}

}  // namespace

void launch_l2_norm(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t cols,
                    int64_t group, float eps, cudaStream_t s, bool pdl) {
  const int64_t warps = rows * (cols / group);
  if (warps == 0) return;
  launch_kernel(l2_norm_kernel, dim3(static_cast<unsigned>((warps + 7) / 8)), dim3(256), 0, s, pdl, x, x_stride, y,
                y_stride, rows, cols / group, group, eps);
  launch_check("l2_norm");
}

}  // namespace df::cuda
