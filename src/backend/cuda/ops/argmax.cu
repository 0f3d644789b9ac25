#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/argmax.cuh"
#include "backend/cuda/ops/launch.cuh"

namespace df::cuda {
namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ void better(float& v, int32_t& i, float v2, int32_t i2) {
  if (v2 > v || (v2 == v && i2 < i)) v = v2, i = i2;
}

// One block per row.
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int64_t xs, int64_t cols, int32_t* out,
                                                                const int32_t* ids) {
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * xs;
  float v = -INFINITY;
  int32_t idx = INT32_MAX;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) better(v, idx, xr[c], static_cast<int32_t>(c));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(v, idx, v2, i2);
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = v, si[warp] = idx;
  __syncthreads();
  if (warp != 0) return;
  v = sv[lane], idx = si[lane];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(v, idx, v2, i2);
  }
  if (lane == 0) {
    idx = idx == INT32_MAX ? 0 : idx;
    out[blockIdx.x] = ids ? ids[idx] : idx;
  }
}


constexpr int kSplitThreads = 256;
constexpr int64_t kSplitChunk = 8192;  // floats per block (at most kMaxSplitBlocks blocks a row)
constexpr int64_t kMaxSplitBlocks = 64;

int64_t split_blocks(int64_t cols) {
  const int64_t b = (cols + kSplitChunk - 1) / kSplitChunk;
  return b < 1 ? 1 : b > kMaxSplitBlocks ? kMaxSplitBlocks : b;
}

struct ArgPart {
  float v;
  int32_t i;
};

// (v, idx) of the best over the block's threads (every thread gets it).
__device__ void block_best(float& v, int32_t& idx) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(v, idx, v2, i2);
  }
  __shared__ float sv[kSplitThreads / 32];
  __shared__ int32_t si[kSplitThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sv[warp] = v, si[warp] = idx;
  __syncthreads();
  v = -INFINITY, idx = INT32_MAX;
#pragma unroll
  for (int w = 0; w < kSplitThreads / 32; ++w) better(v, idx, sv[w], si[w]);
  __syncthreads();
}

// Grid (blocks of a row, rows).
__global__ void __launch_bounds__(kSplitThreads)
    argmax_split_kernel(const float* x, int64_t xs, int64_t cols, int32_t* out, ArgPart* part, int32_t* counters,
                        const int32_t* ids) {
  const int64_t r = blockIdx.y;
  const int nb = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int64_t chunk = (cols + nb - 1) / nb;
  const int64_t c0 = b * chunk, c1 = c0 + chunk < cols ? c0 + chunk : cols;
  pdl_wait();
  pdl_trigger();
  const float* xr = x + r * xs;
  float v = -INFINITY;
  int32_t idx = INT32_MAX;
  for (int64_t c = c0 + threadIdx.x; c < c1; c += kSplitThreads) better(v, idx, xr[c], static_cast<int32_t>(c));
  block_best(v, idx);
  __shared__ int ticket;
  if (threadIdx.x == 0) {
    part[r * nb + b] = ArgPart{v, idx};
    __threadfence();  // the partial is visible before the ticket
    ticket = atomicAdd(counters + r, 1);
  }
  __syncthreads();
  if (ticket != nb - 1) return;
  // The last block of row r: every other block's partial is written (their fences came
  // before their tickets). Read them past L1 (__ldcg): it is not coherent.
  __threadfence();
  v = -INFINITY, idx = INT32_MAX;
  for (int i = threadIdx.x; i < nb; i += kSplitThreads) {
    const ArgPart* p = part + r * nb + i;
    better(v, idx, __ldcg(&p->v), __ldcg(&p->i));
  }
  block_best(v, idx);
  if (threadIdx.x == 0) {
    idx = idx == INT32_MAX ? 0 : idx;
    out[r] = ids ? ids[idx] : idx;
    counters[r] = 0;  // ready for the next call (graph replays included)
  }
}

}  // namespace

void launch_argmax(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, cudaStream_t s,
                   const int32_t* ids) {
  if (rows == 0) return;
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, s>>>(x, x_stride, cols, out, ids);
  launch_check("argmax");
}

}  // namespace df::cuda

namespace df::cuda {

int64_t argmax_counters(int64_t rows) { return rows; }

size_t argmax_partial_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows * split_blocks(cols)) * sizeof(ArgPart);
}

void launch_argmax_split(const float* x, int64_t x_stride, int64_t rows, int64_t cols, int32_t* out, void* partial,
                         int32_t* counters, cudaStream_t s, bool pdl, const int32_t* ids) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(split_blocks(cols)), static_cast<unsigned>(rows));
  launch_kernel(argmax_split_kernel, grid, dim3(kSplitThreads), 0, s, pdl, x, x_stride, cols, out,
                static_cast<ArgPart*>(partial), counters, ids);
  launch_check("argmax_split");
}

}  // namespace df::cuda
