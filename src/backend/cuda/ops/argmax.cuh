// out[r] = index of the largest of x[r][0 .. cols) (lowest index among equals); x row stride in
// floats, out int32 [rows].
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_argmax(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s);

}  // namespace df::cuda
