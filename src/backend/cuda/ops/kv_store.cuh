// Stores rows of k and v [rows, kv_dim] f32 (row strides in floats) as F16 into the cache
// planes K, V [capacity, kv_dim] (one row per position): row r goes to position pos[r]
// (device, when given) or pos0 + r.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

void launch_kv_store(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t rows,
                     int64_t kv_dim, __half* K, __half* V, const int32_t* pos, int64_t pos0, cudaStream_t s);

}  // namespace df::cuda
