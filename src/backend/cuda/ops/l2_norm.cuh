// L2 normalisation of every group of `group` consecutive floats of each row:
// y = x / max(|x|, eps)  (strided rows; x may equal y).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_l2_norm(const float* x, int64_t x_stride, float* y, int64_t y_stride, int64_t rows, int64_t cols,
                    int64_t group, float eps, cudaStream_t s, bool pdl = false);  // pdl: ops/launch.cuh

}  // namespace df::cuda
