// out[r] = index of the largest of x[r][0 .. cols) (lowest index among equals; NaN never
// wins); x row stride in floats, out int32 [rows]. ids (optional, [cols] int32): out[r] =
// ids[that index] instead (an MTP head's drafting slots -> token ids).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

// One block of 1024 threads per row.
void launch_argmax(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s,
                   const int32_t* ids = nullptr);

// The same result over many blocks per row (a vocabulary row is ~150-250k floats: one block
// is latency-bound): each block scans a contiguous chunk, writes its (max, index) to
// `partial`, and the last block of a row to finish (a ticket from counters[r], which it resets
// to 0) reduces them. counters: argmax_counters(rows) ints, zero before the call and after
// it; partial: argmax_partial_bytes(rows, cols) bytes of scratch. pdl: ops/launch.cuh.
int64_t argmax_counters(int64_t rows);
size_t argmax_partial_bytes(int64_t rows, int64_t cols);
void launch_argmax_split(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, void* partial,
                         int32_t* counters, cudaStream_t s, bool pdl, const int32_t* ids = nullptr);

}  // namespace df::cuda
