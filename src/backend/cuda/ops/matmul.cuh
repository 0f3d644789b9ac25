// y [n, m] = x [n, k] * W^T for an f32 W [m, k] (rows w_stride floats apart; k a multiple of
// 32, rows 16-byte aligned); x, y row strides in floats. 64 x 64 output tiles, 32-deep
// steps through shared memory. The backend feeds it bounded tiles of dequantized weight
// rows for batches of more than 8 rows (prefill); decode goes through matvec/.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_matmul_f32_tiled(const float* W, int64_t w_stride, int64_t m, int64_t k, const float* x,
                             int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s);

}  // namespace df::cuda
