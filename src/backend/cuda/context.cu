#include "backend/cuda/context.h"

#include <algorithm>
#include <cstdio>

#include "backend/cuda/cuda_check.h"

namespace df::cuda {

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(1ull << 30));
  return buf;
}

CudaContext::CudaContext(int device) : device_(device) {
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  cuda_check(cudaGetDeviceProperties(&props_, device), "cudaGetDeviceProperties");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  scratch(20u << 20);  // covers attention's partials at any shape, so captures never grow it
  counters(4096);      // 8 rows x 512 heads: decode and verify never grow it
}

CudaContext::~CudaContext() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  if (scratch_) cudaFree(scratch_);
  if (counters_) cudaFree(counters_);
  for (void* p : retired_) cudaFree(p);
  for (void* p : arenas_) cudaFree(p);
  for (void* p : own_weights_) cudaFree(p);
  cudaStreamDestroy(stream_);
}

void CudaContext::make_current() const { cuda_check(cudaSetDevice(device_), "cudaSetDevice"); }

bool CudaContext::capturing() const {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(stream_, &st), "cudaStreamIsCapturing");
  return st != cudaStreamCaptureStatusNone;
}

void* CudaContext::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  if (capturing())
    throw Error("cuda: an op needs " + std::to_string(bytes) + " bytes of scratch while a graph is captured "
                "(run the same shapes once before capturing)");
  // A graph recorded earlier may still use the old buffer: keep it (retired_), grow at least 2x.
  if (scratch_) retired_.push_back(scratch_);
  const size_t want = std::max({bytes, size_t{1} << 20, 2 * scratch_bytes_});
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  cuda_check(cudaMalloc(&scratch_, want), "cudaMalloc(scratch)");
  scratch_bytes_ = want;
  return scratch_;
}

int32_t* CudaContext::counters(size_t n) {
  if (n <= counters_n_) return counters_;
  if (capturing())
    throw Error("cuda: an op needs " + std::to_string(n) + " counters while a graph is captured "
                "(run the same shapes once before capturing)");
  if (counters_) retired_.push_back(counters_);  // as scratch(): recorded graphs may use them
  const size_t want = std::max({n, size_t{4096}, 2 * counters_n_});
  counters_ = nullptr;
  counters_n_ = 0;
  cuda_check(cudaMalloc(&counters_, want * sizeof(int32_t)), "cudaMalloc(counters)");
  cuda_check(cudaMemsetAsync(counters_, 0, want * sizeof(int32_t), stream_), "cudaMemset(counters)");
  counters_n_ = want;
  return counters_;
}

void CudaContext::reserve_weights(uint64_t bytes) {
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  // Keep room for the caches and activations of a session next to the weights.
  const uint64_t headroom = 256ull << 20;
  if (bytes + headroom > free_b)
    throw Error("cuda: the model's weights need " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                ") of device memory plus " + gib(headroom) + " for the session, but " + props_.name + " has " +
                std::to_string(free_b) + " bytes (" + gib(free_b) + ") free of " + gib(total_b));
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc(weights)");
  arenas_.push_back(p);
  arena_ = static_cast<uint8_t*>(p);
  arena_size_ = bytes;
  arena_used_ = 0;
}

void* CudaContext::weight_memory(size_t bytes) {
  const uint64_t aligned = (bytes + 255) / 256 * 256;
  weight_bytes_ += bytes;
  if (arena_ && arena_used_ + aligned <= arena_size_) {
    void* p = arena_ + arena_used_;
    arena_used_ += aligned;
    return p;
  }
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error("cuda: out of device memory loading weights: " + std::to_string(weight_bytes_) +
                " bytes needed so far (" + gib(weight_bytes_) + "), " + std::to_string(free_b) + " bytes (" +
                gib(free_b) + ") free of " + gib(total_b) + " on " + props_.name);
  }
  own_weights_.push_back(p);
  return p;
}

}  // namespace df::cuda
