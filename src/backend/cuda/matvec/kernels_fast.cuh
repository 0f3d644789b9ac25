// The matvec kernel over the planar layout (dev_fast.cuh formats): one warp per RW output
// rows; each lane takes the parts t = lane, lane + 32, ... of its rows in order, U parts at a
// time with every 16-byte load of the U parts issued before the first is used (U * kLoads
// loads in flight per lane and row). The per-row arithmetic is that of a single row, in the
// same order for every N, RW and U: results are bit-identical for every n.
#pragma once
#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/matvec/kernels_raw.cuh"

namespace df::cudamv {

constexpr int kFastWarps = 4;  // warps per block

// The planar weight: rows x q_row_bytes quant plane, rows x m_row_bytes meta plane.
struct PlanarView {
  const uint8_t* q;
  const uint8_t* m;
  size_t q_row_bytes, m_row_bytes;
  int64_t rows, cols;
};

template <class F, int N, int RW, int U>
__global__ void __launch_bounds__(kFastWarps * 32)
    mv_fast(PlanarView v, const float* __restrict__ x, float* __restrict__ y) {
  const int lane = threadIdx.x & 31;
  const int64_t row0 = (int64_t{blockIdx.x} * kFastWarps + threadIdx.x / 32) * RW;
  if (row0 >= v.rows) return;
  const int nparts = static_cast<int>(v.cols / F::kPartElems);
  const int nblocks = nparts / F::kPartsPerBlock;
  const uint8_t* qr[RW];
  const uint8_t* mr[RW];
#pragma unroll
  for (int r = 0; r < RW; ++r) {
    const int64_t row = row0 + r < v.rows ? row0 + r : v.rows - 1;  // clamped: loads stay valid
    qr[r] = v.q + row * v.q_row_bytes;
    mr[r] = v.m + row * v.m_row_bytes;
  }
  float acc[RW][N];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < N; ++j) acc[r][j] = 0.0f;

  for (int t0 = 0; t0 < nparts; t0 += 32 * U) {
    uint4 q[U][RW][F::kLoads];
    typename F::Meta mt[U][RW];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + 32 * u + lane;
      if (t < nparts) {
#pragma unroll
        for (int r = 0; r < RW; ++r) {
#pragma unroll
          for (int i = 0; i < F::kLoads; ++i)
            q[u][r][i] = ld_stream(reinterpret_cast<const uint4*>(qr[r] + (static_cast<int64_t>(i) * nparts + t) * 16));
          mt[u][r] = F::load_meta(mr[r], t, nblocks);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + 32 * u + lane;
      if (t < nparts) {
        const float* xp = x + static_cast<int64_t>(t) * F::kPartElems;
#pragma unroll
        for (int r = 0; r < RW; ++r) F::template dot<N>(q[u][r], mt[u][r], xp, v.cols, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float s = warp_sum(acc[r][j]);
      if (lane == 0 && row0 + r < v.rows) y[j * v.rows + row0 + r] = s;
    }
}

}  // namespace df::cudamv
