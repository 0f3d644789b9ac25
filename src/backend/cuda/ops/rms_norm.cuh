// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w over rows of `cols` floats (x may equal y).
// Strides in floats. pdl: launched with programmatic dependent launch (ops/launch.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_rms_norm(const float* x, int64_t x_stride, const float* w, float eps, float* y, int64_t y_stride,
                     int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);
// The same with one warp per row whatever the shape: the bits of the matvec's fused norm
// prologue (the fallback where a launch cannot fuse it).
void launch_rms_norm_rows(const float* x, int64_t x_stride, const float* w, float eps, float* y, int64_t y_stride,
                          int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);

}  // namespace df::cuda
