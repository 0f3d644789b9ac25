// y [n, m] = x [n, k] * W^T, W [m, k] of ggml type `type` (rows w_stride bytes apart; k a
// multiple of 32); x, y row strides in floats.
//   n <= 8 (decode, verify): launch_matvec_simple, one warp per weight row, every row of x at
//     once (a plain reference kernel; the fast per-format kernels are in matvec/).
//   n > 8 (prefill): launch_matmul_tiled, 64 x 64 output tiles; each 64 x 32 weight tile is
//     decoded into shared memory once per tile (no expanded copy of the matrix).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/types.h"

namespace df::cuda {

constexpr int64_t kMatvecMaxRows = 8;

bool matmul_tiled_supported(GgmlType type);
void launch_matvec_simple(GgmlType type, const void* W, size_t w_stride, int64_t m, int64_t k, const float* x,
                          int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s);
void launch_matmul_tiled(GgmlType type, const void* W, size_t w_stride, int64_t m, int64_t k, const float* x,
                         int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s);

}  // namespace df::cuda
