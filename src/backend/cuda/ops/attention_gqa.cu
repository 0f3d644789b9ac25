#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/attention_gqa.cuh"
#include "backend/cuda/ops/attention_merge.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/qk_head.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {
namespace {

constexpr int kNormWarps = 4;  // warps that run norm_rope_head (FUSED), each with its scratch

// NT threads a block: 128 (default), 256 (wide: CudaOptions::attn_wide).
template <int HD, int kThreads>
struct Tile {
  static constexpr int TP = HD <= 128 ? 64 : 32;      // positions per tile (K + V: 32 KiB at 128 and 256)
  static constexpr int RS = HD + 8;                   // shared row stride in halves: 16-byte reads of 8
                                                      // consecutive rows hit distinct banks
  static constexpr int CPR = HD / 8;                  // 16-byte pieces per row
  static constexpr int LOADS = TP * CPR / kThreads;   // pieces a thread loads per matrix and tile
  static constexpr int DT = HD >= kThreads ? HD / kThreads : 1;  // V-sum dims per thread
  static constexpr int HG = HD >= kThreads ? 1 : kThreads / HD;  // heads a V-sum pass strides over
  static constexpr int NJ = (kGqaMaxGroup + HG - 1) / HG;         // heads per thread at most
  static_assert(TP * CPR % kThreads == 0 && TP % 32 == 0);
};

// Dot of a query row (shared floats, pre-scaled) with an F16 key row (shared), 4 partial sums.
template <int HD>
__device__ __forceinline__ float dot_row(const float* qg, const __half* kr) {
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int c = 0; c < HD / 8; ++c) {
    const uint4 u = *reinterpret_cast<const uint4*>(kr + c * 8);
    const __half2* h2 = reinterpret_cast<const __half2*>(&u);
    const float4 qa = *reinterpret_cast<const float4*>(qg + c * 8);
    const float4 qb = *reinterpret_cast<const float4*>(qg + c * 8 + 4);
    const float2 k0 = __half22float2(h2[0]), k1 = __half22float2(h2[1]);
    const float2 k2 = __half22float2(h2[2]), k3 = __half22float2(h2[3]);
    s[0] = fmaf(qa.x, k0.x, s[0]), s[1] = fmaf(qa.y, k0.y, s[1]);
    s[2] = fmaf(qa.z, k1.x, s[2]), s[3] = fmaf(qa.w, k1.y, s[3]);
    s[0] = fmaf(qb.x, k2.x, s[0]), s[1] = fmaf(qb.y, k2.y, s[1]);
    s[2] = fmaf(qb.z, k3.x, s[2]), s[3] = fmaf(qb.w, k3.y, s[3]);
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// Block (slice, key/value head hk, row r); partial layout per (row, query head, slice) as the
// slice kernel's: [m, l, acc[HD]]. counters (may be null): one int per (row, hk), zero between
// calls; the last used slice of a (row, hk) to finish merges its G heads (a warp per head).
// FUSED: the fused qk_norm_rope of GqaFuse (attention_gqa.cuh); rows = gridDim.z <= 8.
// kThreads 256 (wide): twice the threads over the same tiles (pairs, dims and pieces split
// finer; every sum in the same order: the bits of 128), and the first tile's loads issued
// before the query heads' work instead of after it.
template <int HD, bool FUSED, int kThreads>
__global__ void __launch_bounds__(kThreads)
    gqa_kernel(const float* q, int64_t qs, const __half* K, const __half* V, int64_t kvs, const int32_t* pos,
               int64_t pos0, AttnArgs a, AttnSplit sp, float* part, float* out, int64_t os, int32_t* counters,
               GqaFuse f) {
  using T = Tile<HD, kThreads>;
  constexpr int kWarps = kThreads / 32;
  constexpr int TP = T::TP, RS = T::RS, CPR = T::CPR, LOADS = T::LOADS, DT = T::DT, HG = T::HG, NJ = T::NJ;
  __shared__ alignas(16) __half sK[TP * RS];
  __shared__ alignas(16) __half sV[TP * RS];
  __shared__ alignas(16) float sQ[kGqaMaxGroup * HD];
  __shared__ float sW[kGqaMaxGroup][TP];  // a tile's scores, then its softmax weights
  __shared__ float sM[kGqaMaxGroup], sL[kGqaMaxGroup], sC[kGqaMaxGroup];
  __shared__ int sTicket;
  __shared__ float sX[FUSED ? kNormWarps : 1][FUSED ? HD : 1];  // a warp's head scratch (norm_rope_head)
  __shared__ float2 sRope[FUSED ? HD / 2 : 1];  // FUSED: rope_cs at the row's position (pairs < n_rot / 2)
  // Key/value heads along x: the blocks of slice 0 of every head are scheduled first (at short
  // contexts most slices are past every row's position and exit at once).
  const int slice = blockIdx.y, hk = blockIdx.x;
  const int64_t r = blockIdx.z;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int G = a.n_head / a.n_head_kv;
  constexpr int KW = HD / 32;
  float wq[KW], wk[KW];  // FUSED: the q and k norm weights (constant) before the wait
  if constexpr (FUSED) {
#pragma unroll
    for (int i = 0; i < KW; ++i) wq[i] = __ldg(f.q_norm + lane + 32 * i), wk[i] = __ldg(f.k_norm + lane + 32 * i);
  }
  // The slice's extent and (FUSED) its first tile's loads come before the wait: the cache rows
  // the kernel reads were written by earlier steps (kernels complete before the previous kernel
  // passed its own wait and triggered this launch), the call's own positions are made from k
  // and v after the wait (is_new rows are not loaded), and pos is an input of the step. Without
  // the fusion the previous kernel may be the kv_store of these rows: everything after the wait.
  int64_t last = 0, s0 = 0, s1 = 0, first = 0;
  int used = 0;
  auto extent = [&] {
    last = pos ? pos[r] : pos0 + r;
    if constexpr (FUSED) first = pos[0];  // FUSED: pos given
    const int64_t used64 = last / sp.split_len + 1;
    used = static_cast<int>(used64 < sp.n_splits ? used64 : sp.n_splits);
    s0 = slice * sp.split_len;
    s1 = min(s0 + sp.split_len, last + 1);
  };
  // FUSED: the call's rows' positions (ascending) are made from k and v, not read.
  const int rows = static_cast<int>(gridDim.z);
  auto is_new = [&](int64_t p) {
    bool hit = false;
    if constexpr (FUSED) {
      if (p >= first) {
#pragma unroll 1
        for (int j = 0; j < rows; ++j) hit = hit || pos[j] == p;
      }
    }
    return hit;
  };
  const __half* Kh = K + static_cast<int64_t>(hk) * HD;
  const __half* Vh = V + static_cast<int64_t>(hk) * HD;
  uint4 rk[LOADS], rv[LOADS];
  auto load = [&](int64_t p0) {
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const int c = t + j * kThreads, p = c / CPR, col = c % CPR;
      if (p0 + p < s1 && !is_new(p0 + p)) {
        rk[j] = *reinterpret_cast<const uint4*>(Kh + (p0 + p) * kvs + col * 8);
        rv[j] = *reinterpret_cast<const uint4*>(Vh + (p0 + p) * kvs + col * 8);
      } else {
        rk[j] = rv[j] = make_uint4(0u, 0u, 0u, 0u);  // finite zeros: weight 0 times 0
      }
    }
  };
  // FUSED: warp w < kNormWarps makes query head w and the call's row w (when that row's position
  // falls into this slice) from registers loaded right after the wait, all in one round trip;
  // further heads and rows (G or rows above kNormWarps) load when they are made.
  bool own = false;
  if constexpr (FUSED) {
    extent();
    // A slice past the row's position has nothing to do: it exits without waiting (slice 0 of
    // the row always waits, so this grid still completes after the previous kernel).
    if (sp.n_splits > 1 && slice >= used) return;
    if (warp < kNormWarps && warp < rows) {
      const int64_t pw = pos[warp];
      own = pw >= s0 && pw < s1;
    }
    // The row's rotations (q heads and its own k row), from pos (an input of the step) before the
    // wait: the serial angle products and sincosf off the path after it.
    for (int i = t; i < f.rope.n_rot / 2; i += kThreads) sRope[i] = rope_cs(f.rope, static_cast<int32_t>(last), i);
    __syncthreads();
    if (s0 < s1) load(s0);
  }
  pdl_wait();
  pdl_trigger();
  if constexpr (!FUSED) extent();
  if (counters && sp.n_splits > 1 && slice >= used) return;

  const int64_t hs = FUSED && f.q_head_stride > 0 ? f.q_head_stride : HD;  // query head stride
  const float* qr = q + r * qs + static_cast<int64_t>(hk) * G * hs;
  // FUSED, gated: the gates of the group's heads (GqaFuse::gate), at q's strides.
  const float* gr = FUSED && f.gate ? f.gate + r * qs + static_cast<int64_t>(hk) * G * hs : nullptr;
  float xq[KW], xk[KW], xv[KW];  // FUSED: warp's query head and own row (k, v), raw
  if constexpr (FUSED) {
    if (warp < kNormWarps && warp < G) load_head(qr + warp * hs, HD, lane, xq);
    if (own) {
      load_head(f.k + warp * f.k_stride + static_cast<int64_t>(hk) * HD, HD, lane, xk);
      load_head(f.v + warp * f.v_stride + static_cast<int64_t>(hk) * HD, HD, lane, xv);
    } else {
#pragma unroll
      for (int i = 0; i < KW; ++i) xk[i] = xv[i] = 0.0f;  // not used (no own row in this slice)
    }
  }
  auto query_heads = [&] {  // sQ: the group's query heads, scaled (FUSED: normed and rotated here)
    if constexpr (FUSED) {
      for (int g = warp; warp < kNormWarps && g < G; g += kNormWarps) {
        auto put = [&](int c, float o) { sQ[g * HD + c] = o * a.scale; };
        if (g == warp)
          norm_rope_regs<KW>(xq, wq, f.eps, f.rope, static_cast<int32_t>(last), sX[warp], lane, put, sRope);
        else
          norm_rope_head<KW>(qr + g * hs, wq, f.eps, f.rope, static_cast<int32_t>(last), sX[warp], lane, put, sRope);
      }
    } else {
      for (int i = t; i < G * HD; i += kThreads) sQ[i] = qr[i] * a.scale;
    }
  };
  constexpr bool kWide = kThreads > 128;
  // Not fused, 128 threads: the query heads, then the first tile's loads (fewer registers live
  // across the heads' work); wide: the loads first, in flight during the heads' work.
  if constexpr (!kWide && !FUSED) query_heads();
  if (t < kGqaMaxGroup) sM[t] = -INFINITY, sL[t] = 0.0f;

  // The V-sum share of thread t: dims d0 .. d0 + DT - 1 of heads gs, gs + HG, ...
  const int d0 = (t % (HD / DT)) * DT, gs = t / (HD / DT);
  float acc[NJ][DT];
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < DT; ++e) acc[j][e] = 0.0f;

  if (!FUSED && s0 < s1) load(s0);
  if constexpr (kWide || FUSED) query_heads();  // while the first tile's loads are in flight
  for (int64_t p0 = s0; p0 < s1; p0 += TP) {
    __syncthreads();  // the previous tile's shared reads are done (first: sQ, sM, sL written)
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const int c = t + j * kThreads, p = c / CPR, col = c % CPR;
      *reinterpret_cast<uint4*>(sK + p * RS + col * 8) = rk[j];
      *reinterpret_cast<uint4*>(sV + p * RS + col * 8) = rv[j];
    }
    const int n = static_cast<int>(min(static_cast<int64_t>(TP), s1 - p0));
    if constexpr (FUSED) {  // the call's own rows in this tile: made here (and stored by their own block)
      __syncthreads();      // after the tile's (zero) pieces of those rows
      for (int j = warp; warp < kNormWarps && j < rows; j += kNormWarps) {
        const int64_t pj = pos[j];
        if (pj < p0 || pj >= p0 + n) continue;
        const int row = static_cast<int>(pj - p0);
        __half* kc = j == r ? f.K + pj * kvs + static_cast<int64_t>(hk) * HD : nullptr;
        __half* vc = j == r ? f.V + pj * kvs + static_cast<int64_t>(hk) * HD : nullptr;
        float lk[KW], lv[KW];  // row j's k and v: loaded after the wait (j == warp) or now
        if (j == warp) {
#pragma unroll
          for (int i = 0; i < KW; ++i) lk[i] = xk[i], lv[i] = xv[i];
        } else {
          load_head(f.k + j * f.k_stride + static_cast<int64_t>(hk) * HD, HD, lane, lk);
          load_head(f.v + j * f.v_stride + static_cast<int64_t>(hk) * HD, HD, lane, lv);
        }
        norm_rope_regs<KW>(lk, wk, f.eps, f.rope, static_cast<int32_t>(pj), sX[warp], lane, [&](int c, float o) {
                             const __half h = __float2half_rn(o);
                             sK[row * RS + c] = h;
                             if (kc) kc[c] = h;
                           }, pj == last ? sRope : nullptr);
#pragma unroll
        for (int i = 0; i < KW; ++i) {
          const int c = lane + 32 * i;
          const __half h = __float2half_rn(lv[i]);
          sV[row * RS + c] = h;
          if (vc) vc[c] = h;
        }
      }
    }
    __syncthreads();
    if (p0 + TP < s1) load(p0 + TP);  // the next tile's loads in flight during this one
    // Scores: a thread per (head, position); a warp's lanes share the head (q reads broadcast).
    for (int i = t; i < G * TP; i += kThreads) {
      const int g = i / TP, p = i % TP;
      sW[g][p] = p < n ? dot_row<HD>(sQ + g * HD, sK + p * RS) : -INFINITY;
    }
    __syncthreads();
    // Online softmax per head: a warp per head, lanes over the tile's positions.
    for (int g = warp; g < G; g += kWarps) {
      float mt = -INFINITY;
#pragma unroll
      for (int p = lane; p < TP; p += 32) mt = fmaxf(mt, sW[g][p]);
      mt = warp_max(mt);  // finite: the tile has n >= 1 positions
      const float mo = sM[g], mn = fmaxf(mo, mt);
      float ls = 0.0f;
#pragma unroll
      for (int p = lane; p < TP; p += 32) {
        const float w = expf(sW[g][p] - mn);  // 0 past the slice (-inf)
        sW[g][p] = w;
        ls += w;
      }
      ls = warp_sum(ls);
      if (lane == 0) {
        const float c = expf(mo - mn);  // 0 on the first tile (mo = -inf)
        sC[g] = c, sL[g] = fmaf(sL[g], c, ls), sM[g] = mn;
      }
    }
    __syncthreads();
    // V sums: thread t's dims for its heads, positions in order.
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int g = gs + j * HG;
      if (g < G) {
        const float c = sC[g];
#pragma unroll
        for (int e = 0; e < DT; ++e) acc[j][e] *= c;
      }
    }
#pragma unroll 8
    for (int p = 0; p < n; ++p) {
      float v[DT];
      if constexpr (DT == 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(sV + p * RS + d0));
        v[0] = f.x, v[1] = f.y;
      } else {
        v[0] = __half2float(sV[p * RS + d0]);
      }
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int g = gs + j * HG;
        if (g < G) {
          const float w = sW[g][p];
#pragma unroll
          for (int e = 0; e < DT; ++e) acc[j][e] = fmaf(w, v[e], acc[j][e]);
        }
      }
    }
  }
  __syncthreads();  // sM, sL final (also for an empty slice)
  // One slice (or, with the fused merge, the row's only used slice): the output straight from
  // this block. merge_slices over one slice gives these bits (its weight expf(m - m) = 1, its
  // sum l + zeros, 0 + acc * 1, then times 1 / l), so rows keep their bits whatever the batch.
  if (sp.n_splits == 1 || (counters && used == 1)) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int g = gs + j * HG;
      if (g >= G) continue;
      const float inv = 1.0f / sL[g];
      float* orow = out + r * os + static_cast<int64_t>(hk * G + g) * HD + d0;
      const float* grow = gr ? gr + g * hs + d0 : nullptr;
#pragma unroll
      for (int e = 0; e < DT; ++e) orow[e] = gated_out(acc[j][e] * inv, grow, e);
    }
    return;
  }
  float* rp = part + (r * a.n_head + static_cast<int64_t>(hk) * G) * sp.n_splits * (HD + 2);  // head hk * G
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int g = gs + j * HG;
    if (g >= G) continue;
    float* pp = rp + (static_cast<int64_t>(g) * sp.n_splits + slice) * (HD + 2);
#pragma unroll
    for (int e = 0; e < DT; ++e) pp[2 + d0 + e] = acc[j][e];
  }
  if (t < G) {
    float* pp = rp + (static_cast<int64_t>(t) * sp.n_splits + slice) * (HD + 2);
    pp[0] = sM[t], pp[1] = sL[t];
  }
  if (!counters) return;
  __threadfence();  // this slice's partials are visible before its ticket
  __syncthreads();
  int32_t* counter = counters + r * a.n_head_kv + hk;
  if (t == 0) sTicket = atomicAdd(counter, 1);
  __syncthreads();
  if (sTicket != used - 1) return;
  // The last used slice: the others' partials are written (fenced before their tickets).
  if (t == 0) *counter = 0;  // ready for the next call (graph replays included)
  __threadfence();
  for (int g = warp; g < G; g += kWarps)
    merge_slices<HD / 32, true>(rp + static_cast<int64_t>(g) * sp.n_splits * (HD + 2), used, lane,
                                out + r * os + static_cast<int64_t>(hk * G + g) * HD + lane * (HD / 32),
                                gr ? gr + g * hs + lane * (HD / 32) : nullptr);
}

// One warp per (head, row) when no counters: attention.cu's merge kernel's work.
// gate (may be null): GqaFuse::gate, at rows gs floats apart and heads hs apart.
template <int HD>
__global__ void gqa_merge_kernel(const float* part, const int32_t* pos, int64_t pos0, AttnArgs a, AttnSplit sp,
                                 float* out, int64_t os, const float* gate, int64_t gs, int64_t hs) {
  const int h = blockIdx.x;
  const int64_t r = blockIdx.y;
  pdl_wait();
  pdl_trigger();
  const int64_t last = pos ? pos[r] : pos0 + r;
  const int64_t used = last / sp.split_len + 1;
  const int n = static_cast<int>(used < sp.n_splits ? used : sp.n_splits);
  merge_slices<HD / 32, false>(part + (r * a.n_head + h) * sp.n_splits * (HD + 2), n, threadIdx.x,
                               out + r * os + static_cast<int64_t>(h) * HD + threadIdx.x * (HD / 32),
                               gate ? gate + r * gs + h * hs + threadIdx.x * (HD / 32) : nullptr);
}

template <int HD>
void launch_hd(const float* q, int64_t qs, int64_t rows, const __half* K, const __half* V, int64_t kvs,
               const int32_t* pos, int64_t pos0, const AttnArgs& a, float* scratch, float* out, int64_t os,
               int32_t* counters, cudaStream_t s, bool pdl, const GqaFuse* fuse, bool wide) {
  const AttnSplit sp = attention_split(rows, a);
  const dim3 grid(static_cast<unsigned>(a.n_head_kv), static_cast<unsigned>(sp.n_splits),
                  static_cast<unsigned>(rows));
  const GqaFuse f = fuse ? *fuse : GqaFuse{};
  auto go = [&](auto kernel, int threads) {
    launch_kernel(kernel, grid, dim3(static_cast<unsigned>(threads)), 0, s, pdl, q, qs, K, V, kvs, pos, pos0, a, sp,
                  scratch, out, os, counters, f);
  };
  if (fuse)
    wide ? go(gqa_kernel<HD, true, 256>, 256) : go(gqa_kernel<HD, true, 128>, 128);
  else
    wide ? go(gqa_kernel<HD, false, 256>, 256) : go(gqa_kernel<HD, false, 128>, 128);
  launch_check("attention (gqa)");
  if (sp.n_splits > 1 && !counters) {
    launch_kernel(gqa_merge_kernel<HD>, dim3(static_cast<unsigned>(a.n_head), static_cast<unsigned>(rows)),
                  dim3(32), 0, s, pdl, scratch, pos, pos0, a, sp, out, os, f.gate, qs,
                  f.q_head_stride > 0 ? f.q_head_stride : int64_t{HD});
    launch_check("attention (gqa) merge");
  }
}

}  // namespace

void launch_attention_gqa(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                          int64_t kv_stride, const int32_t* pos, int64_t pos0, const AttnArgs& a, float* scratch,
                          float* out, int64_t out_stride, cudaStream_t s, int32_t* counters, bool pdl,
                          const GqaFuse* fuse, bool wide) {
  if (rows == 0) return;
  if (!attention_gqa_supported(a)) throw Error("cuda attention (gqa): unsupported head shape");
  if (fuse && (rows > kGqaFuseMaxRows || !pos || fuse->rope.head_dim != a.head_dim || fuse->rope.n_rot > a.head_dim ||
               fuse->K != K || fuse->V != V))
    throw Error("cuda attention (gqa): the fused qk_norm_rope needs <= 8 rows, positions and the cache it reads");
  switch (a.head_dim) {
    case 32: launch_hd<32>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, scratch, out, out_stride, counters, s, pdl, fuse, wide); break;
    case 64: launch_hd<64>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, scratch, out, out_stride, counters, s, pdl, fuse, wide); break;
    case 128: launch_hd<128>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, scratch, out, out_stride, counters, s, pdl, fuse, wide); break;
    case 256: launch_hd<256>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, scratch, out, out_stride, counters, s, pdl, fuse, wide); break;
    default: throw Error("cuda attention (gqa): head_dim " + std::to_string(a.head_dim));
  }
}

}  // namespace df::cuda
