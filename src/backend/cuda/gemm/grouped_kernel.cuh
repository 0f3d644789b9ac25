// Internal: the grouped tensor-core GEMM of grouped.cuh, the tile kernel of gemm_kernel.cuh
// (8 warps, 2 along x rows x 4 along weight rows, m16n8k16 f16 mma.sync, 64-column steps
// double-buffered: x by cp.async, the weight tile dequantized into shared memory by the
// format's matvec/ source) with its operands taken from a device table per block:
//
//   tile = tiles[blockIdx.y] = {e, p0, rows}  (e < 0: unused, the block exits)
//   weight rows: expert e's planes from the stack's table (table[e], table[E + e])
//   x rows:  xh[x_row[p0 + i]]  for i < rows (others zero)
//   y rows:  y[y_row[p0 + i]]   for i < rows
//
// kSwiglu: the block's BN weight rows are BN/2 rows of the gate stack and the same BN/2 rows
// of the up stack (warps 0..3 along weight rows: wn 0, 1 gate, wn 2, 3 up); the epilogue
// stages the f32 tile in shared memory and writes y = silu(gate) * up (act_swiglu) for BN/2
// output columns. Sums per element in the dense tiles' order (64-column steps, mma k16).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/gemm/gemm_kernel.cuh"
#include "backend/cuda/gemm/grouped.cuh"
#include "backend/cuda/ops/activations.cuh"

namespace df::cuda::gemm {

template <class S, int BM, int BN, bool kSwiglu>
__global__ void __launch_bounds__(kThreads) grouped_kernel(GroupedArgs g) {
  constexpr int MI = BM / 32, NI = BN / 32;
  constexpr int kPE = S::kPE, kPartsRow = kBK / kPE, kParts = BN * kPartsRow;
  constexpr int kPPT = (kParts + kThreads - 1) / kThreads;
  constexpr int kAChunks = BM * kBK / 8 / kThreads;
  constexpr int kCols = kSwiglu ? BN / 2 : BN;  // output columns of a block
  static_assert(NI % 2 == 0 && kBK % kPE == 0 && kAChunks >= 1, "tile");
  const int4 tile = g.tiles[blockIdx.y];
  if (tile.x < 0) return;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* As = reinterpret_cast<__half*>(smem_raw);  // [2][BM][kLds]
  __half* Bs = As + 2 * BM * kLds;                    // [2][BN][kLds]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 1, wn = warp >> 1;
  const int64_t e = tile.x, p0 = tile.y;
  const int rows = tile.z;
  const int64_t k = g.cols, m = g.rows;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kCols;
  const int KT = static_cast<int>(k / kBK);
  PlanarView v[2];
#pragma unroll
  for (int i = 0; i < (kSwiglu ? 2 : 1); ++i)
    v[i] = PlanarView{g.table[i][e], g.table[i][g.n_expert + e], g.q_row_bytes, g.m_row_bytes, m, k, g.tables};

  // this thread's x rows (fixed over the k steps)
  const __half* a_src[kAChunks];
#pragma unroll
  for (int i = 0; i < kAChunks; ++i) {
    const int c = tid + i * kThreads, r = c >> 3, cc = (c & 7) * 8;
    a_src[i] = r < rows ? g.x + static_cast<int64_t>(g.x_row[p0 + r]) * k + cc : nullptr;
  }
  auto load_a = [&](int kt, int buf) {
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const int c = tid + i * kThreads, r = c >> 3, cc = (c & 7) * 8;
      const __half* src = a_src[i] ? a_src[i] + static_cast<int64_t>(kt) * kBK : g.x;
      cp_async16(As + (buf * BM + r) * kLds + cc, src, a_src[i] ? 16 : 0);
    }
    cp_async_commit();
  };
  typename S::Regs regs[kPPT];
  // weight row r of the block tile: its view and row
  auto b_row = [&](int r, int& which) -> int64_t {
    if constexpr (kSwiglu) {
      which = r >= BN / 2;
      return m0 + (r % (BN / 2));
    } else {
      which = 0;
      return m0 + r;
    }
  };
  auto load_b = [&](int kt) {
#pragma unroll
    for (int i = 0; i < kPPT; ++i) {
      const int p = tid + i * kThreads;
      if (kParts % kThreads == 0 || p < kParts) {
        const int r = p / kPartsRow, pt = p % kPartsRow;
        int which;
        const int64_t row = b_row(r, which);
        S::load(v[which], row < m ? row : m - 1, kt * kPartsRow + pt, regs[i]);
      }
    }
  };
  auto store_b = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kPPT; ++i) {
      const int p = tid + i * kThreads;
      if (kParts % kThreads == 0 || p < kParts) {
        const int r = p / kPartsRow, pt = p % kPartsRow;
        int which;
        const bool ok = b_row(r, which) < m;
        float w[kPE];
        S::dequant(v[which], regs[i], w);
        __half* dst = Bs + (buf * BN + r) * kLds + pt * kPE;
        if constexpr (kPE % 8 == 0) {
#pragma unroll
          for (int j = 0; j < kPE; j += 8) {
            uint4 u;
            u.x = ok ? pack_half2(w[j], w[j + 1]) : 0u;
            u.y = ok ? pack_half2(w[j + 2], w[j + 3]) : 0u;
            u.z = ok ? pack_half2(w[j + 4], w[j + 5]) : 0u;
            u.w = ok ? pack_half2(w[j + 6], w[j + 7]) : 0u;
            *reinterpret_cast<uint4*>(dst + j) = u;
          }
        } else {
          static_assert(kPE == 4, "part size");
          uint2 u;
          u.x = ok ? pack_half2(w[0], w[1]) : 0u;
          u.y = ok ? pack_half2(w[2], w[3]) : 0u;
          *reinterpret_cast<uint2*>(dst) = u;
        }
      }
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int a = 0; a < MI; ++a)
#pragma unroll
    for (int b = 0; b < NI; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  auto compute = [&](int buf) {
    const __half* A = As + buf * BM * kLds;
    const __half* B = Bs + buf * BN * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        ldmatrix_x4(a[mi], A + (wm * (BM / 2) + mi * 16 + (lane & 15)) * kLds + kk + (lane >> 4) * 8);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, B + (wn * (BN / 4) + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLds + kk +
                           ((lane >> 3) & 1) * 8);
        b[2 * nj][0] = r[0], b[2 * nj][1] = r[1], b[2 * nj + 1][0] = r[2], b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  };

  load_a(0, 0);
  load_b(0);
  store_b(0);
  cp_async_wait_all();
  __syncthreads();
  for (int kt = 0; kt < KT; ++kt) {
    const int cur = kt & 1;
    const bool more = kt + 1 < KT;
    if (more) {
      load_a(kt + 1, cur ^ 1);
      load_b(kt + 1);
    }
    compute(cur);
    if (more) store_b(cur ^ 1);
    cp_async_wait_all();
    __syncthreads();
  }

  if constexpr (!kSwiglu) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int tr = wm * (BM / 2) + mi * 16 + (lane >> 2);
        const int64_t col = m0 + wn * (BN / 4) + ni * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = tr + 8 * h;
          if (t >= rows) continue;
          float* yr = g.y + static_cast<int64_t>(g.y_row[p0 + t]) * g.ys;
          if (col < m) yr[col] = acc[mi][ni][2 * h];
          if (col + 1 < m) yr[col + 1] = acc[mi][ni][2 * h + 1];
        }
      }
  } else {
    // the f32 tile [BM][BN] in shared memory (the stages are free after the loop's last sync)
    constexpr int kCs = BN + 4;
    static_assert(static_cast<size_t>(BM) * kCs * sizeof(float) <= smem_bytes<BM, BN>(), "epilogue tile");
    float* Cs = reinterpret_cast<float*>(smem_raw);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int tr = wm * (BM / 2) + mi * 16 + (lane >> 2);
        const int tc = wn * (BN / 4) + ni * 8 + (lane & 3) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          Cs[(tr + 8 * h) * kCs + tc] = acc[mi][ni][2 * h];
          Cs[(tr + 8 * h) * kCs + tc + 1] = acc[mi][ni][2 * h + 1];
        }
      }
    __syncthreads();
    for (int i = tid; i < BM * kCols; i += kThreads) {
      const int r = i / kCols, c = i % kCols;
      if (r >= rows || m0 + c >= m) continue;
      g.y[static_cast<int64_t>(g.y_row[p0 + r]) * g.ys + m0 + c] = act_swiglu(Cs[r * kCs + c], Cs[r * kCs + c + kCols]);
    }
  }
}

template <class S, int BM, int BN, bool kSwiglu>
void launch_grouped_tile(const GroupedArgs& g, cudaStream_t s) {
  constexpr int kCols = kSwiglu ? BN / 2 : BN;
  cudaFuncSetAttribute(grouped_kernel<S, BM, BN, kSwiglu>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(smem_bytes<BM, BN>()));
  const dim3 grid(static_cast<unsigned>((g.rows + kCols - 1) / kCols), static_cast<unsigned>(g.max_tiles));
  grouped_kernel<S, BM, BN, kSwiglu><<<grid, kThreads, smem_bytes<BM, BN>(), s>>>(g);
  check_launch_gemm("grouped gemm");
}

template <class S>
void launch_grouped_source(const GroupedArgs& g, cudaStream_t s) {
  if (g.table[1]) launch_grouped_tile<S, kGroupedBM, 128, true>(g, s);
  else launch_grouped_tile<S, kGroupedBM, 128, false>(g, s);
}

// The launch of g.type among Ss; false when none matches.
template <class... Ss>
bool grouped_list(SourceList<Ss...>, const GroupedArgs& g, cudaStream_t s) {
  return ((Ss::kType == g.type ? (launch_grouped_source<Ss>(g, s), true) : false) || ...);
}

}  // namespace df::cuda::gemm
