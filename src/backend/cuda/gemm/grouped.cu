// grouped.cuh: the tile table and the dispatch over the format families.
#include "backend/cuda/gemm/grouped.cuh"

#include <algorithm>

#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/gemm.cuh"
#include "common/error.h"

namespace df::cuda::gemm {

void check_launch_gemm(const char* what);  // gemm.cu

namespace {

constexpr int kTileWarps = 8;

// Warp w of block b writes the tiles of expert e = b * kTileWarps + w: its padded rows start
// after the 8-row chunks of experts 0 .. e - 1 (launch_moe_group), its tiles after theirs.
__global__ void grouped_tiles_kernel(const int32_t* counts, int64_t E, int4* tiles) {
  const int lane = threadIdx.x & 31;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kTileWarps + (threadIdx.x >> 5);
  if (e >= E) return;
  int64_t c0 = 0, t0 = 0;
  for (int64_t j = lane; j < e; j += 32) {
    c0 += (counts[j] + 7) / 8;
    t0 += (counts[j] + kGroupedBM - 1) / kGroupedBM;
  }
  for (int o = 16; o > 0; o >>= 1) {
    c0 += __shfl_xor_sync(0xffffffffu, c0, o);
    t0 += __shfl_xor_sync(0xffffffffu, t0, o);
  }
  const int cnt = counts[e], nt = (cnt + kGroupedBM - 1) / kGroupedBM;
  for (int i = lane; i < nt; i += 32)
    tiles[t0 + i] = make_int4(static_cast<int>(e), static_cast<int>(8 * c0 + i * kGroupedBM),
                              min(kGroupedBM, cnt - i * kGroupedBM), 0);
}

}  // namespace

int64_t grouped_max_tiles(int64_t n_slots, int64_t E) { return n_slots / kGroupedBM + std::min(n_slots, E) + 1; }

void launch_grouped_tiles(const int32_t* counts, int64_t E, int64_t max_tiles, int4* tiles, cudaStream_t s) {
  if (max_tiles <= 0) return;
  if (cudaMemsetAsync(tiles, 0xff, static_cast<size_t>(max_tiles) * sizeof(int4), s) != cudaSuccess)
    throw Error("cuda grouped gemm: cudaMemsetAsync of the tile table failed");
  const unsigned blocks = static_cast<unsigned>((E + kTileWarps - 1) / kTileWarps);
  grouped_tiles_kernel<<<blocks, 32 * kTileWarps, 0, s>>>(counts, E, tiles);
  check_launch_gemm("grouped tiles");
}

bool grouped_gemm(const GroupedArgs& g, cudaStream_t s) {
  if (g.cols % kColsStep != 0 || g.rows <= 0 || g.max_tiles <= 0 || g.max_tiles > 65535) return false;
  return grouped_fast(g, s) || grouped_raw_basic(g, s) || grouped_raw_iq(g, s);
}

}  // namespace df::cuda::gemm
