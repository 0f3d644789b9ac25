// A pure read kernel for measuring the device's read bandwidth (the bench's ceiling): sums
// `bytes` of device memory with 16-byte loads, several in flight per thread, and writes one
// float per block (so the loads cannot be dropped).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace df::cuda {

// `sink` holds at least read_bw_blocks() floats.
int read_bw_blocks();
void launch_read_bw(const void* data, size_t bytes, float* sink, cudaStream_t s);

}  // namespace df::cuda
