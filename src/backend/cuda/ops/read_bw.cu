#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/read_bw.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {
namespace {

constexpr int kThreads = 512, kBlocks = 132 * 8, kUnroll = 4;

__global__ void __launch_bounds__(kThreads) read_bw_kernel(const uint4* p, size_t n, float* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * kThreads;
  size_t i = static_cast<size_t>(blockIdx.x) * kThreads + threadIdx.x;
  uint32_t acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  const float s = warp_sum(static_cast<float>(acc & 0xffff));
  if (threadIdx.x == 0) sink[blockIdx.x] = s;
}

}  // namespace

int read_bw_blocks() { return kBlocks; }

void launch_read_bw(const void* data, size_t bytes, float* sink, cudaStream_t s) {
  read_bw_kernel<<<kBlocks, kThreads, 0, s>>>(static_cast<const uint4*>(data), bytes / 16, sink);
  launch_check("read_bw");
}

}  // namespace df::cuda
