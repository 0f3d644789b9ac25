// out[i] = x[ids[i]] for an f32 matrix x [rows, cols] (row strides in floats): the gather of
// activation rows (the output rows of a batch). Weight tables go through matvec/'s get_rows.
// An id outside [0, rows) yields a row of NaN (ops cannot report errors).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_gather_rows_f32(const float* x, int64_t x_stride, int64_t rows, int64_t cols, const int32_t* ids,
                            int64_t n, float* out, int64_t out_stride, cudaStream_t s);

}  // namespace df::cuda
