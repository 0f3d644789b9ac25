#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/copy_batch.cuh"
#include "backend/cuda/ops/launch.cuh"

namespace df::cuda {
namespace {

struct CopyBatchArgs {
  CopyItem item[kMaxCopyItems];
};

// Units of U bytes (U = 16, 4 or 1: the widest that every address, length and stride of the
// item is a multiple of). A contiguous item (both strides = row_bytes) is one long row spread
// over all blocks of its grid row; otherwise blocks take rows, threads the units of a row.
template <class U>
__device__ void copy_item(const CopyItem& it) {
  const auto* s = reinterpret_cast<const U*>(it.src);
  auto* d = reinterpret_cast<U*>(it.dst);
  const bool contig = it.src_stride == it.row_bytes && it.dst_stride == it.row_bytes;
  if (contig) {
    const int64_t units = it.row_bytes * it.rows / static_cast<int64_t>(sizeof(U));
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < units;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x)
      d[i] = s[i];
    return;
  }
  const int64_t units = it.row_bytes / static_cast<int64_t>(sizeof(U));
  const int64_t ss = it.src_stride / static_cast<int64_t>(sizeof(U)), ds = it.dst_stride / static_cast<int64_t>(sizeof(U));
  for (int64_t r = blockIdx.x; r < it.rows; r += gridDim.x)
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) d[r * ds + u] = s[r * ss + u];
}

__global__ void copy_batch_kernel(const __grid_constant__ CopyBatchArgs a) {
  const CopyItem& it = a.item[blockIdx.y];  // param space, not a local copy (__grid_constant__)
  if (it.rows <= 0 || it.row_bytes <= 0) return;
  const auto bits = reinterpret_cast<uintptr_t>(it.src) | reinterpret_cast<uintptr_t>(it.dst) |
                    static_cast<uintptr_t>(it.row_bytes) | static_cast<uintptr_t>(it.src_stride) |
                    static_cast<uintptr_t>(it.dst_stride);
  if ((bits & 15u) == 0) copy_item<uint4>(it);
  else if ((bits & 3u) == 0) copy_item<uint32_t>(it);
  else copy_item<uint8_t>(it);
}

}  // namespace

void launch_copy_batch(const CopyItem* items, int n, cudaStream_t s) {
  if (n <= 0) return;
  CopyBatchArgs a{};
  int64_t blocks = 1;
  for (int i = 0; i < n && i < kMaxCopyItems; ++i) {
    a.item[i] = items[i];
    const CopyItem& it = items[i];
    const bool contig = it.src_stride == it.row_bytes && it.dst_stride == it.row_bytes;
    // a block of 256 threads per 4 KB of a contiguous item (one 16-byte unit a thread), per row
    // otherwise; at most 1024 blocks an item (grid-stride beyond)
    const int64_t want = contig ? (it.row_bytes * it.rows + 4095) / 4096 : it.rows;
    blocks = std::max(blocks, std::min<int64_t>(want, 1024));
  }
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(std::min(n, kMaxCopyItems)));
  launch_kernel(copy_batch_kernel, grid, dim3(256), 0, s, false, a);
  launch_check("copy_batch");
}

}  // namespace df::cuda
