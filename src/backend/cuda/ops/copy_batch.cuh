// Several device-to-device copies of byte matrices in one launch (CudaBackend::copy_batch):
// item i copies rows[i] rows of row_bytes[i] bytes from src (row stride src_stride) to dst
// (dst_stride). Items run concurrently: no item's destination may overlap another item's
// source or destination (the caller checks).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace df::cuda {

struct CopyItem {
  const uint8_t* src = nullptr;
  uint8_t* dst = nullptr;
  int64_t row_bytes = 0, rows = 0, src_stride = 0, dst_stride = 0;
};

constexpr int kMaxCopyItems = 32;  // items per launch (the kernel's parameters: 1.5 KB)
// CudaBackend::copy under CudaOptions::copy_kernels: copies up to this many bytes by the kernel
// (one item), larger ones by cudaMemcpy2DAsync.
constexpr size_t kMaxCopyKernelBytes = size_t{1} << 20;

// items[0 .. n) with 0 < n <= kMaxCopyItems; rows == 0 items copy nothing.
void launch_copy_batch(const CopyItem* items, int n, cudaStream_t s);

}  // namespace df::cuda
