#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/upload_small.cuh"

namespace df::cuda {
namespace {

constexpr int kWords = static_cast<int>(kMaxUploadKernelBytes / 4);

struct UploadWords {
  uint32_t w[kWords];
};

// one thread a 4-byte word: dst[i] = a.w[i], i < n
__global__ void upload_small_kernel(uint32_t* dst, int n, const __grid_constant__ UploadWords a) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) dst[i] = a.w[i];
}

}  // namespace

bool upload_small_fits(const void* dst, size_t bytes) {
  return bytes > 0 && bytes <= kMaxUploadKernelBytes && bytes % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 4 == 0;
}

void launch_upload_small(void* dst, const void* src, size_t bytes, cudaStream_t s) {
  UploadWords a{};
  std::memcpy(a.w, src, bytes);
  const int n = static_cast<int>(bytes / 4);
  launch_kernel(upload_small_kernel, dim3(1), dim3(kWords), 0, s, false, static_cast<uint32_t*>(dst), n, a);
  launch_check("upload_small");
}

}  // namespace df::cuda
