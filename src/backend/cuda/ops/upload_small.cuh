// A small host-to-device upload as a kernel whose parameters carry the bytes
// (CudaBackend::upload under CudaOptions::copy_kernels): the launch copies the host bytes when
// it is made, as cudaMemcpyAsync from pageable memory stages them before it returns, and the
// device runs it as one more kernel in the stream instead of a copy-engine transfer between
// two kernels.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace df::cuda {

constexpr size_t kMaxUploadKernelBytes = 1024;  // the kernel's parameter block (words below)

// Whether upload_small can take this upload: 0 < bytes <= kMaxUploadKernelBytes, bytes and
// dst a multiple of 4.
bool upload_small_fits(const void* dst, size_t bytes);
// dst[0, bytes) = src[0, bytes) on stream s (upload_small_fits must hold).
void launch_upload_small(void* dst, const void* src, size_t bytes, cudaStream_t s);

}  // namespace df::cuda
