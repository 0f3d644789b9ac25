// out[i] = row ids[i] of a weight table of ggml type `type` (dequantized to f32); ids device
// int32 [n], out row stride in floats. An id outside [0, table_rows) yields a row of NaN
// (ops never synchronise to report errors; the model checks ids on the host).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/types.h"

namespace df::cuda {

bool get_rows_supported(GgmlType type);
void launch_get_rows(GgmlType type, const void* table, size_t table_stride, int64_t table_rows, int64_t cols,
                     const int32_t* ids, int64_t n, float* out, int64_t out_stride, cudaStream_t s);

}  // namespace df::cuda
