// Workbench prototype (issue 9, helper mega2): the second version of the persistent one-launch
// Q4_0 decode chain (persistent_chain.cuh is the first). The same stages (per layer: norm +
// Q|K|V, o, norm + the SwiGLU gate/up pair, down) in ONE launch, a device-wide barrier
// between stages, and the final residual bit for bit that of the chain of mv_kernel launches.
// What changed against the first version (its section in docs/cuda_backend.md lists why that
// one lost 2.2x):
// - Work item = (row unit, sub): sub w of the wpr "warps per row" of mv_kernel's launch takes
//   the parts 32 w + lane + k 32 wpr, k = 0, 1, ..., in order (mv_kernel's lane rl = 32 w + lane).
//   Any warp of the grid takes any item (items i = gw, gw + NWG, ...; sub = i / units), and
//   each item's warp_sum goes to a partial buffer [wpr][units] in global memory; the NEXT
//   stage's prologue adds the wpr partials of each element in sub order (mv_kernel's order:
//   res = sub 0, += sub 1, ...), then (pair) swiglu: no named barriers, no lockstep warps.
// - A step = U parts per lane of one row (U 16-byte plain register loads + U fp16 scales, all
//   issued before any is used), in a ring of D register sets: D - 1 .. D steps in flight per
//   lane, across items and across stages (the weights never depend on x).
// - The cursor keeps the lane's row pointer and part count per item; the stage table is in
//   shared memory (read when an item or stage begins, never per step).
// - Barrier split: a warp leaving stage s first issues L2 prefetches (cp.async.bulk.prefetch)
//   of its next PF items beyond the register ring (DRAM keeps working through the barrier
//   and the prologue), then the block arrives and waits.
// - Blocks of NW warps, BPS blocks per SM (16 warps per SM at 128 registers).
//
// Per stage and block, the prologue: the x of the stage from the previous stage's partials
// (ld.global.cg, batched), into shared memory as f32; with a norm, warp 0's rms_scale_of over
// it, then quantize_x (with rms_apply): mv_kernel's int8 x, the same bytes.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"

#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/kernels_fast.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cudamv::persist2 {

// One stage = one launch of the per-matrix chain: nmat matrices over the same x (pair: gate,
// up). Input: the previous stage's partials in_g [in_w][in_stride] (pair: in_u too; stage 0:
// x0 with in_w 1). Output: partials out_g [wpr][units] (pair: gate in out_g, up in out_u).
struct Stage {
  const uint8_t* q[3];
  const uint8_t* m[3];
  const float* in_g;
  const float* in_u;
  const float* norm_w;  // null: no norm
  float* out_g;
  float* out_u;
  int rows0, rows01;  // units < rows0: matrix 0, < rows01: matrix 1, else 2
  int units, cols, nparts, wpr, pair, items;
  int q_row_bytes, m_row_bytes;
  int in_w, in_stride, in_pair;
  float eps;
};

struct Params {
  const Stage* stages;
  int nstages;
  unsigned* bar;   // arrivals, monotonic within a launch
  unsigned* done;  // blocks finished (the last one resets both)
  unsigned* err;   // 1: a barrier spin gave up
  float* out;      // the last stage's combined output (the residual): [out_rows]
  int out_rows;
  int pf;          // items per warp prefetched into L2 when the warp leaves a stage
  int flags;       // kFastNorm | kStageCp | kCtlWarp | kFixedOnly | kBarrierOnly
  int xs_offset, xq_offset;  // shared memory: stage table at 0, then the f32 x (kStageCp: every
                             // input plane), then the int8 x
  int ring_offset;           // then (kCpRing) the warps' slots
};
// kFastNorm: the norm's sum of squares with its x loads batched 8 a lane (rms_scale_of's order
// and operations: the same bits). kStageCp: the input planes copied to shared memory by cp.async
// (all of a thread's copies in flight at once: one L2 round trip per stage), then added there.
// kCtlWarp: the block's last warp takes no items: it arrives at and polls the barrier (its
// fence never waits on weight loads in flight) and runs the norm. kFixedOnly: no items at all
// (every barrier and prologue: the fixed cost per stage; wrong bits). kBarrierOnly: barriers only.
// kCpRing (host: picks the kCp instance): the slots in shared memory.
constexpr int kFastNorm = 1, kStageCp = 2, kCtlWarp = 4, kFixedOnly = 8, kBarrierOnly = 16, kCpRing = 32;

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint16_t ld_stream_u16(const uint8_t* p) {
  uint16_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ void cp16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

// A ring slot's registers and what the compute side needs of its step.
template <int U>
struct Slot {
  uint4 q[U];
  uint16_t m[U];
  int st;   // stage (nstages: past the end)
  int t;    // the lane's first part of the step
  int nu;   // the lane's valid parts of the step (0..U)
  int fin;  // last step of a pass: (sub * units + unit) * 2 + pass, else -1
};

// The load cursor of one warp: its items of every stage in order, U parts per step.
struct LoadCursor {
  const Stage* tab;  // shared memory
  int nst, gw, nwg, lane;
  int s = 0, j = 0, pass = 0, k0 = 0;
  // the current item
  int sub = 0, mat = 0, fin_idx = 0, nkw = 0, nlane = 0, tl = 0;
  const uint8_t* qp = nullptr;
  const uint8_t* mp = nullptr;
  int tsq = 0, tsm = 0;  // bytes between a lane's parts (32 wpr parts)

  __host__ __device__ void set_item() {
    const Stage& S = tab[s];
    const int i = gw + j * nwg;
    sub = i / S.units;
    const int unit = i - sub * S.units;
    int row = unit;
    mat = 0;
    if (!S.pair) {
      mat = unit < S.rows0 ? 0 : unit < S.rows01 ? 1 : 2;
      row = mat == 0 ? unit : mat == 1 ? unit - S.rows0 : unit - S.rows01;
    }
    fin_idx = sub * S.units + unit;
    const int rs = 32 * S.wpr;
    nkw = (S.nparts - 32 * sub + rs - 1) / rs;
    tl = 32 * sub + lane;
    nlane = tl < S.nparts ? (S.nparts - tl + rs - 1) / rs : 0;
    tsq = 16 * rs, tsm = 2 * rs;
    pass = 0, k0 = 0;
    qp = S.q[mat] + static_cast<int64_t>(row) * S.q_row_bytes + 16 * tl;
    mp = S.m[mat] + static_cast<int64_t>(row) * S.m_row_bytes + 2 * tl;
  }
  __host__ __device__ void enter(int s0) {
    for (s = s0; s < nst; ++s)
      if (gw < tab[s].items) {
        j = 0;
        set_item();
        return;
      }
  }
  __host__ __device__ void advance(int U) {
    k0 += U;
    if (k0 < nkw) return;
    if (tab[s].pair && pass == 0) {
      pass = 1, k0 = 0;  // the same row of matrix 1 (a pair's item is matrix 0's: mat 0)
      qp = tab[s].q[1] + (qp - tab[s].q[0]), mp = tab[s].m[1] + (mp - tab[s].m[0]);
      return;
    }
    ++j;
    if (gw + j * nwg < tab[s].items) set_item();
    else enter(s + 1);
  }
  // (host: the bookkeeping only, for the coverage check of check_cover). kCp: the quant words
  // and scales go by cp.async into the warp's shared-memory slot `sm` ([U][32 lanes][16 B],
  // then [U][64 B] of scales, copied by lanes 0..3), one commit group per step and lane.
  template <int U, bool kCp = false>
  __host__ __device__ void issue(Slot<U>& sl, uint8_t* sm = nullptr) {
    sl.st = s;
    if (s >= nst) {
#ifdef __CUDA_ARCH__
      if constexpr (kCp) asm volatile("cp.async.commit_group;" ::: "memory");
#endif
      return;
    }
#ifdef __CUDA_ARCH__
    if constexpr (kCp) {
      const uint8_t* m0 = mp - 2 * lane;  // lane 0's scale
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (k0 + u < nlane) cp16(sm + u * 512 + 16 * lane, qp + static_cast<int64_t>(k0 + u) * tsq);
        // scales of parts tl - lane + (k0 + u) rs + 8 lane .. + 8 (the row's parts come in 8s)
        if (lane < 4 && k0 + u < nkw && tl - lane + (k0 + u) * (tsq / 16) + 8 * lane < tab[s].nparts)
          cp16(sm + U * 512 + u * 64 + 16 * lane, m0 + (k0 + u) * tsm + 16 * lane);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (k0 + u < nlane) {
          sl.q[u] = ld_stream(reinterpret_cast<const uint4*>(qp + static_cast<int64_t>(k0 + u) * tsq));
          sl.m[u] = ld_stream_u16(mp + (k0 + u) * tsm);
        }
    }
#else
    (void)sm;
    for (int u = 0; u < U; ++u) sl.m[u] = static_cast<uint16_t>(k0 + u < nlane ? 1 : 0);
#endif
    sl.t = tl + k0 * (tsq / 16);
    const int nu = nlane - k0;
    sl.nu = nu < 0 ? 0 : nu > U ? U : nu;
    sl.fin = k0 + U >= nkw ? 2 * fin_idx + pass : -1;
    advance(U);
  }
  // L2 prefetch of this warp's items j + 1 .. j + pf of the cursor's stage (every chunk of
  // 32 parts: 512 B of quants, 64 B of scales; one chunk per lane).
  __device__ void prefetch(int pf) const {
    if (s >= nst) return;
    const Stage& S = tab[s];
    const int rs = 32 * S.wpr;
    for (int p = 1; p <= pf; ++p) {
      const int i = gw + (j + p) * nwg;
      if (i >= S.items) return;
      const int isub = i / S.units, unit = i - isub * S.units;
      int row = unit, imat = 0;
      if (!S.pair) {
        imat = unit < S.rows0 ? 0 : unit < S.rows01 ? 1 : 2;
        row = imat == 0 ? unit : imat == 1 ? unit - S.rows0 : unit - S.rows01;
      }
      const int nk = (S.nparts - 32 * isub + rs - 1) / rs;
      const int passes = S.pair ? 2 : 1;
      for (int c = lane; c < nk * passes; c += 32) {
        const int ps = c / nk, k = c - ps * nk;
        const int t0 = 32 * isub + k * rs;
        const int n = S.nparts - t0 < 32 ? S.nparts - t0 : 32;
        const int mm = S.pair ? ps : imat;
        l2_prefetch(S.q[mm] + static_cast<int64_t>(row) * S.q_row_bytes + 16 * t0, 16 * n);
        l2_prefetch(S.m[mm] + static_cast<int64_t>(row) * S.m_row_bytes + 2 * t0, 2 * n);
      }
    }
  }
};

// The device-wide barrier of transition c (c >= 1): every block's stores of stage c - 1 done.
__device__ __forceinline__ void grid_barrier(const Params& P, int c, int ctl_thread) {
  __syncthreads();
  if (static_cast<int>(threadIdx.x) == ctl_thread) {
    __threadfence();
    red_release_add(P.bar, 1);
    const unsigned target = static_cast<unsigned>(c) * gridDim.x;
    long spins = 0;
    while (ld_acquire(P.bar) < target)
      if (++spins > (1l << 22)) {
        atomicExch(P.err, 1u);
        break;
      }
  }
  __syncthreads();
}

// x of stage c into xs (f32): the previous stage's partials added in sub order (pair, in_w 1:
// swiglu of the gate and up values), loads batched (kB float4 of every plane per thread
// before any is used: one L2 round trip per kB).
__device__ __forceinline__ void combine_x(const Stage& S, float* xs) {
  constexpr int kB = 2;
  const int n4 = S.cols / 4, nt = static_cast<int>(blockDim.x);
  const int planes = S.in_pair ? 2 : S.in_w;
  for (int base = static_cast<int>(threadIdx.x); base < n4; base += kB * nt) {
    float4 g[kB][4];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int i = base + b * nt;
#pragma unroll
      for (int w = 0; w < 4; ++w)
        if (i < n4 && w < planes) {
          const float* src = S.in_pair && w == 1 ? S.in_u : S.in_g + static_cast<int64_t>(w) * S.in_stride;
          g[b][w] = __ldcg(reinterpret_cast<const float4*>(src) + i);
        }
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int i = base + b * nt;
      if (i >= n4) continue;
      float4 a = g[b][0];
      if (S.in_pair) {
        const float4 v = g[b][1];
        a = make_float4(swiglu_of(a.x, v.x), swiglu_of(a.y, v.y), swiglu_of(a.z, v.z), swiglu_of(a.w, v.w));
      } else {
#pragma unroll
        for (int w = 1; w < 4; ++w)
          if (w < planes) a.x += g[b][w].x, a.y += g[b][w].y, a.z += g[b][w].z, a.w += g[b][w].w;
      }
      reinterpret_cast<float4*>(xs)[i] = a;
    }
  }
  __syncthreads();
}

// combine_x by cp.async: every input plane into shared memory (plane w at xs + w cols; all
// of a thread's 16-byte copies issued before any wait), then added in sub order into plane 0.
__device__ __forceinline__ void combine_x_cp(const Stage& S, float* xs) {
  const int n4 = S.cols / 4, nt = static_cast<int>(blockDim.x);
  const int planes = S.in_pair ? 2 : S.in_w;
  for (int w = 0; w < planes; ++w) {
    const float* src = S.in_pair && w == 1 ? S.in_u : S.in_g + static_cast<int64_t>(w) * S.in_stride;
    for (int i = static_cast<int>(threadIdx.x); i < n4; i += nt) {
      const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(xs + w * S.cols + 4 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + 4 * i) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (planes > 1)
    for (int i = static_cast<int>(threadIdx.x); i < n4; i += nt) {
      float4 a = reinterpret_cast<const float4*>(xs)[i];
      if (S.in_pair) {
        const float4 v = reinterpret_cast<const float4*>(xs + S.cols)[i];
        a = make_float4(swiglu_of(a.x, v.x), swiglu_of(a.y, v.y), swiglu_of(a.z, v.z), swiglu_of(a.w, v.w));
      } else {
        for (int w = 1; w < planes; ++w) {
          const float4 b = reinterpret_cast<const float4*>(xs + w * S.cols)[i];
          a.x += b.x, a.y += b.y, a.z += b.z, a.w += b.w;
        }
      }
      reinterpret_cast<float4*>(xs)[i] = a;
    }
  __syncthreads();
}

// rms_scale_of (ops/activations.cuh) with the loads batched: lane l adds c = l, l + 32, ... in
// order with fmaf, then the same butterfly and rsqrtf: the same bits. cols % 256 == 0.
__device__ __forceinline__ float rms_scale_fast(const float* xs, int cols, float eps) {
  const int lane = static_cast<int>(threadIdx.x & 31), n = cols / 32;
  float sum = 0.0f;
  for (int i0 = 0; i0 < n; i0 += 8) {
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = xs[lane + 32 * (i0 + k)];
#pragma unroll
    for (int k = 0; k < 8; ++k) sum = fmaf(v[k], v[k], sum);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return rsqrtf(sum / static_cast<float>(cols) + eps);
}

// The stage's int8 x in xq (mv_kernel's prologue on the same values). Ends synchronised.
// norm_warp: the warp that sums the norm's squares.
__device__ __forceinline__ void prologue(const Stage& S, float* xs, uint8_t* xq, float* row_scale, int flags,
                                         int norm_warp) {
  if (flags & kStageCp) combine_x_cp(S, xs);
  else combine_x(S, xs);
  const int cols = S.cols;
  if (S.norm_w) {
    if (static_cast<int>(threadIdx.x >> 5) == norm_warp) {
      const float sc = flags & kFastNorm ? rms_scale_fast(xs, cols, S.eps)
                                         : cuda::rms_scale_of(cols, S.eps, [&](int c) { return xs[c]; });
      if ((threadIdx.x & 31) == 0) *row_scale = sc;
    }
    __syncthreads();
    const float sc = *row_scale;
    const float* nw = S.norm_w;
    quantize_x<32, false>(
        [&](int, int c) {
          const float4 a = *reinterpret_cast<const float4*>(xs + c);
          return make_float4(cuda::rms_apply(a.x, sc, nw[c]), cuda::rms_apply(a.y, sc, nw[c + 1]),
                             cuda::rms_apply(a.z, sc, nw[c + 2]), cuda::rms_apply(a.w, sc, nw[c + 3]));
        },
        1, cols, xq);
  } else {
    quantize_x<32, false>([&](int, int c) { return *reinterpret_cast<const float4*>(xs + c); }, 1, cols, xq);
  }
  __syncthreads();
}

// NW warps per block, D ring slots of U parts per lane; kMinBlocks: launch bound (registers);
// kCp: the slots' bytes in shared memory (cp.async, P.ring_offset: D U 576 B per warp), not in
// registers (then only the slots' small fields are registers).
template <int NW, int D, int U, int kMinBlocks, bool kCp = false>
__global__ void __launch_bounds__(NW * 32, kMinBlocks) chain2_kernel(Params P) {
  extern __shared__ float4 p2smem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(p2smem4);
  Stage* tab = reinterpret_cast<Stage*>(smem);
  float* xs = reinterpret_cast<float*>(smem + P.xs_offset);
  uint8_t* xq = smem + P.xq_offset;
  __shared__ float row_scale;
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int nst = P.nstages;
  {  // the stage table into shared memory (4-byte words)
    const int nw = nst * static_cast<int>(sizeof(Stage) / 4);
    const unsigned* src = reinterpret_cast<const unsigned*>(P.stages);
    unsigned* dst = reinterpret_cast<unsigned*>(tab);
    for (int i = static_cast<int>(threadIdx.x); i < nw; i += static_cast<int>(blockDim.x)) dst[i] = src[i];
    __syncthreads();
  }
  LoadCursor lc;
  lc.tab = tab, lc.nst = nst, lc.lane = lane;
  const int ctl = P.flags & kCtlWarp ? 1 : 0;  // the last warp: barrier and norm, no items
  const int ctl_thread = ctl ? (NW - 1) * 32 : 0, norm_warp = ctl ? NW - 1 : 0;
  lc.gw = static_cast<int>(blockIdx.x) * (NW - ctl) + warp, lc.nwg = static_cast<int>(gridDim.x) * (NW - ctl);
  lc.enter((ctl && warp == NW - 1) || (P.flags & (kFixedOnly | kBarrierOnly)) ? nst : 0);
  Slot<U> ring[D];
  constexpr int kSlotB = U * 576;
  uint8_t* wring = smem + P.ring_offset + warp * D * kSlotB;
#pragma unroll
  for (int d = 0; d < D; ++d) lc.template issue<U, kCp>(ring[d], wring + d * kSlotB);

  int cs = -1;  // the stage whose x is in xq
  int cols = 0, nparts = 0, xq_rb = 0, rs = 0;
  float* out_g = nullptr;
  float* out_u = nullptr;
  float acc = 0.0f;
  bool run = true;
  while (run) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      if (!run) break;
      Slot<U>& sl = ring[d];
      if (sl.st != cs) {  // warp-uniform: leave stage cs for sl.st (every stage's block work in between)
        if (P.pf > 0) lc.prefetch(P.pf);
        while (cs < sl.st) {
          ++cs;
          if (cs > 0) grid_barrier(P, cs, ctl_thread);
          if (cs < nst && !(P.flags & kBarrierOnly)) prologue(tab[cs], xs, xq, &row_scale, P.flags, norm_warp);
        }
        if (cs >= nst) {
          run = false;
          break;
        }
        const Stage& S = tab[cs];
        cols = S.cols, nparts = S.nparts, xq_rb = static_cast<int>(xq_row_bytes(cols)), rs = 32 * S.wpr;
        out_g = S.out_g, out_u = S.out_u;
      }
      uint8_t* ssl = wring + d * kSlotB;
      if constexpr (kCp) {
        asm volatile("cp.async.wait_group %0;" ::"n"(D - 1) : "memory");  // this slot's group
        __syncwarp();  // the scales lanes 0..3 copied
      }
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (u < sl.nu) {
          const int t = sl.t + u * rs;
          uint4 q[1];
          uint16_t mm;
          if constexpr (kCp) {
            q[0] = *reinterpret_cast<const uint4*>(ssl + u * 512 + 16 * lane);
            mm = *reinterpret_cast<const uint16_t*>(ssl + U * 512 + u * 64 + 2 * lane);
          } else {
            q[0] = sl.q[u], mm = sl.m[u];
          }
          const XQ xa{xq + t * 16, xq + cols + t * 8, xq_rb, nparts * 16};
          float a1[1] = {acc};
          Dp4aQ4_0::dot<1>(q, Dp4aQ4_0::Meta{mm}, xa, a1);
          acc = a1[0];
        }
      if (sl.fin >= 0) {
        const float r = cuda::warp_sum(acc);
        acc = 0.0f;
        if (lane == 0) ((sl.fin & 1) ? out_u : out_g)[sl.fin >> 1] = r;
      }
      if constexpr (kCp) __syncwarp();  // every lane done with the slot before it is refilled
      lc.template issue<U, kCp>(sl, ssl);
    }
  }
  // cs == nst: past the last barrier. The residual from the last stage's partials.
  const Stage& L = tab[nst - 1];
  for (int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); r < P.out_rows;
       r += static_cast<int>(gridDim.x * blockDim.x)) {
    float a = __ldcg(L.out_g + r);
    for (int w = 1; w < L.wpr; ++w) a += __ldcg(L.out_g + static_cast<int64_t>(w) * L.units + r);
    P.out[r] = a;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(P.done, 1u) == gridDim.x - 1) {  // every block is past its last barrier
      *P.bar = 0;
      *P.done = 0;
      __threadfence();
    }
  }
}

// Host side: a variant (kernel instance, blocks per SM, L2 prefetch items).
struct Variant {
  int nw, d, u, bps, pf, flags;
};
using Chain2Kernel = void (*)(Params);
inline Chain2Kernel kernel_of(int nw, int d, int u, int bps, bool cp = false) {
  const int code = nw * 1000 + d * 100 + u * 10 + bps + (cp ? 100000 : 0);
  switch (code) {
    case 116621: return chain2_kernel<16, 6, 2, 1, true>;
    case 116421: return chain2_kernel<16, 4, 2, 1, true>;
    case 116441: return chain2_kernel<16, 4, 4, 1, true>;
    case 116821: return chain2_kernel<16, 8, 2, 1, true>;
    case 16341: return chain2_kernel<16, 3, 4, 1>;
    case 16241: return chain2_kernel<16, 2, 4, 1>;
    case 16421: return chain2_kernel<16, 4, 2, 1>;
    case 16321: return chain2_kernel<16, 3, 2, 1>;
    case 8342: return chain2_kernel<8, 3, 4, 2>;
    case 8243: return chain2_kernel<8, 2, 4, 3>;
    case 8423: return chain2_kernel<8, 4, 2, 3>;
    default: return nullptr;
  }
}
inline const char* kernel_list() {
  return "NW:D:U:BPS in 16:3:4:1, 16:2:4:1, 16:4:2:1, 16:3:2:1, 8:3:4:2, 8:2:4:3, 8:4:2:3; with flag 32 (cp ring): "
         "16:6:2:1, 16:4:2:1, 16:4:4:1, 16:8:2:1";
}

// Shared memory: the stage table, the f32 x (kStageCp: the input planes, max_in floats) and the
// int8 x of the widest stage.
inline size_t smem_of(int nstages, int max_cols, int max_in, int ring_bytes, int& xs_offset, int& xq_offset,
                      int& ring_offset) {
  xs_offset = static_cast<int>((static_cast<size_t>(nstages) * sizeof(Stage) + 15) & ~size_t{15});
  xq_offset = xs_offset + 4 * std::max(max_cols, max_in);
  ring_offset = xq_offset + static_cast<int>(xq_row_bytes(max_cols));
  return static_cast<size_t>(ring_offset) + static_cast<size_t>(ring_bytes);
}

// The chain's stages from its layers' matrices (host). A matrix: its planes and shape.
struct Mat {
  const uint8_t* q;
  const uint8_t* m;
  int rows, cols, q_row_bytes, m_row_bytes;
};
struct LayerMats {
  Mat wq, wk, wv, wo, wg, wu, wd;
};

// The stages of the chain (per layer: norm + Q|K|V, o, norm + gate/up, down). x: the residual
// that stage 0 reads; alloc(n): a buffer of n floats for partials; wpr_of(units, nparts):
// mv_kernel's warps per row; wprs: the four stages' wpr.
template <class WprOf, class Alloc>
std::vector<Stage> make_stages(const std::vector<LayerMats>& layers, const float* x, const float* norm_w, float eps,
                               WprOf&& wpr_of, Alloc&& alloc, std::vector<int>& wprs) {
  std::vector<Stage> stages;
  const Mat& a0 = layers.at(0).wq;
  const int hidden = a0.cols, nq = a0.rows, nk = layers[0].wk.rows, nv = layers[0].wv.rows;
  const int ffn = layers[0].wg.rows;
  const int w_qkv = wpr_of(nq + nk + nv, hidden / 32), w_o = wpr_of(hidden, layers[0].wo.cols / 32);
  const int w_gu = wpr_of(2 * ffn, hidden / 32), w_d = wpr_of(hidden, ffn / 32);
  float* pq = alloc(static_cast<size_t>(w_qkv) * (nq + nk + nv));
  float* po = alloc(static_cast<size_t>(w_o) * hidden);
  float* pg = alloc(static_cast<size_t>(w_gu) * ffn);
  float* pu = alloc(static_cast<size_t>(w_gu) * ffn);
  float* pd = alloc(static_cast<size_t>(w_d) * hidden);
  auto set_mat = [](Stage& st, int i, const Mat& w) {
    st.q[i] = w.q, st.m[i] = w.m, st.cols = w.cols, st.nparts = w.cols / 32;
    st.q_row_bytes = w.q_row_bytes, st.m_row_bytes = w.m_row_bytes;
  };
  const float* in_g = x;
  const float* in_u = nullptr;
  int in_w = 1, in_stride = hidden, in_pair = 0;
  auto push = [&](Stage st, int wpr, float* og, float* ou) {
    st.wpr = wpr, st.items = st.units * wpr, st.out_g = og, st.out_u = ou;
    st.in_g = in_g, st.in_u = in_u, st.in_w = in_w, st.in_stride = in_stride, st.in_pair = in_pair;
    st.eps = eps;
    if (st.cols % 256 != 0 || st.units % 4 != 0 || wpr > 4 || (st.pair && wpr != 1))
      throw df::Error("persist2: cols % 256, units % 4, wpr <= 4 (a pair's 1) needed");
    stages.push_back(st);
    in_g = og, in_u = ou, in_w = wpr, in_stride = st.units, in_pair = st.pair;
  };
  for (const LayerMats& l : layers) {
    Stage a{}, b{}, c{}, d{};
    set_mat(a, 0, l.wq), set_mat(a, 1, l.wk), set_mat(a, 2, l.wv);
    a.rows0 = l.wq.rows, a.rows01 = l.wq.rows + l.wk.rows, a.units = l.wq.rows + l.wk.rows + l.wv.rows;
    a.norm_w = norm_w;
    push(a, w_qkv, pq, nullptr);
    set_mat(b, 0, l.wo);
    b.rows0 = b.rows01 = b.units = l.wo.rows;
    push(b, w_o, po, nullptr);
    set_mat(c, 0, l.wg), set_mat(c, 1, l.wu);
    c.pair = 1, c.rows0 = c.rows01 = c.units = l.wg.rows, c.norm_w = norm_w;
    push(c, w_gu, pg, pu);
    set_mat(d, 0, l.wd);
    d.rows0 = d.rows01 = d.units = l.wd.rows;
    push(d, w_d, pd, nullptr);
  }
  wprs = {w_qkv, w_o, w_gu, w_d};
  return stages;
}

// Walks every warp's load cursor of a grid of `warps` warps on the host (U parts a step: the
// kernel's own cursor code) and checks that every part of every row of every stage is loaded
// exactly once, by the lane mv_kernel's lane rl = 32 sub + lane would be, in increasing order
// within each (row, sub), and that every partial is written once, at its last step. "" if so.
template <int U>
std::string check_cover(const std::vector<Stage>& stages, int warps) {
  const int nst = static_cast<int>(stages.size());
  std::vector<std::vector<uint8_t>> seen(stages.size()), fin(stages.size());
  for (int s = 0; s < nst; ++s) {
    const Stage& S = stages[static_cast<size_t>(s)];
    seen[static_cast<size_t>(s)].assign(static_cast<size_t>(S.pair ? 2 : 1) * S.units * S.nparts, 0);
    fin[static_cast<size_t>(s)].assign(static_cast<size_t>(S.pair ? 2 : 1) * S.items, 0);
  }
  for (int gw = 0; gw < warps; ++gw)
    for (int lane = 0; lane < 32; ++lane) {
      LoadCursor lc;
      lc.tab = stages.data(), lc.nst = nst, lc.gw = gw, lc.nwg = warps, lc.lane = lane;
      lc.enter(0);
      int last_t = -1, prev_s = -1;
      while (lc.s < nst) {
        const int s = lc.s, pass = lc.pass, sub = lc.sub;
        const Stage& S = stages[static_cast<size_t>(s)];
        const int unit = lc.fin_idx - sub * S.units;
        if (s < prev_s) return "stage order";
        prev_s = s;
        Slot<U> sl;
        lc.issue(sl);
        if (sl.st != s) return "slot stage";
        for (int u = 0; u < sl.nu; ++u) {
          const int t = sl.t + u * 32 * S.wpr;
          if (t >= S.nparts || t % (32 * S.wpr) != 32 * sub + lane || t <= last_t || sl.m[u] != 1) return "bad part";
          last_t = t;
          ++seen[static_cast<size_t>(s)][(static_cast<size_t>(pass) * S.units + unit) * S.nparts + t];
        }
        for (int u = sl.nu; u < U; ++u)
          if (sl.m[u] != 0) return "load outside nu";
        if (sl.fin >= 0) {
          if ((sl.fin & 1) != pass || (sl.fin >> 1) != sub * S.units + unit) return "bad fin";
          if (lane == 0) ++fin[static_cast<size_t>(s)][static_cast<size_t>(pass) * S.items + (sl.fin >> 1)];
          last_t = -1;
        }
      }
    }
  for (int s = 0; s < nst; ++s) {
    for (uint8_t v : seen[static_cast<size_t>(s)])
      if (v != 1) return "stage " + std::to_string(s) + ": a part loaded " + std::to_string(v) + " times";
    for (uint8_t v : fin[static_cast<size_t>(s)])
      if (v != 1) return "stage " + std::to_string(s) + ": a partial written " + std::to_string(v) + " times";
  }
  return "";
}

// Owns the stage table, the partial buffers and the barrier words of one chain.
class Chain2 {
 public:
  // x: the residual (stage 0 reads it, the launch overwrites it with the chain's result);
  // norm_w: the norm weights of both norms; wpr_of(units, nparts): mv_kernel's warps per row.
  template <class WprOf>
  Chain2(const std::vector<LayerMats>& layers, float* x, const float* norm_w, float eps, WprOf&& wpr_of) : x_(x) {
    stages_ = make_stages(layers, x, norm_w, eps, wpr_of, [&](size_t n) { return alloc(n); }, wprs_);
    for (const Stage& st : stages_)
      max_cols_ = std::max(max_cols_, st.cols), max_in_ = std::max(max_in_, (st.in_pair ? 2 : st.in_w) * st.cols);
    const int hidden = layers.at(0).wq.cols;
    out_rows_ = hidden;
    void* p = nullptr;
    check(cudaMalloc(&p, stages_.size() * sizeof(Stage)), "stages");
    bufs_.push_back(p);
    dstages_ = static_cast<Stage*>(p);
    check(cudaMemcpy(p, stages_.data(), stages_.size() * sizeof(Stage), cudaMemcpyHostToDevice), "stages");
    check(cudaMalloc(&p, 16), "sync");
    bufs_.push_back(p);
    sync_ = static_cast<unsigned*>(p);
    check(cudaMemset(p, 0, 16), "sync");
  }
  ~Chain2() {
    for (void* p : bufs_) cudaFree(p);
  }
  Chain2(const Chain2&) = delete;
  Chain2& operator=(const Chain2&) = delete;

  const std::vector<int>& wprs() const { return wprs_; }

  int nstages() const { return static_cast<int>(stages_.size()); }
  unsigned err() const {
    unsigned e = 0;
    check(cudaMemcpy(&e, sync_ + 2, 4, cudaMemcpyDeviceToHost), "err");
    return e;
  }
  void reset_sync() const { check(cudaMemset(sync_, 0, 16), "sync reset"); }
  // Shared memory, occupancy and registers of a variant; false: not instantiated or no fit.
  bool prepare(const Variant& v, size_t& smem, int& occ, cudaFuncAttributes& fa, std::string& why) const {
    const Chain2Kernel k = kernel_of(v.nw, v.d, v.u, v.bps, (v.flags & kCpRing) != 0);
    if (!k) {
      why = std::string("not instantiated (") + kernel_list() + ")";
      return false;
    }
    int xs = 0, xq = 0, ro = 0, optin = 0;
    smem = smem_of(nstages(), max_cols_, v.flags & kStageCp ? max_in_ : 0, ring_bytes(v), xs, xq, ro);
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "optin");
    if (smem + 256 > static_cast<size_t>(optin)) {
      why = "shared memory does not fit";
      return false;
    }
    check(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)), "smem attr");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k, v.nw * 32, smem), "occupancy");
    check(cudaFuncGetAttributes(&fa, k), "attributes");
    if (occ < v.bps) {
      why = "occupancy " + std::to_string(occ) + " < blocks per SM asked";
      return false;
    }
    return true;
  }
  // One launch of the whole chain (prepare() first); grid = SMs x bps.
  void launch(const Variant& v, int sms, cudaStream_t s) const {
    int xs = 0, xq = 0, ro = 0;
    const size_t smem = smem_of(nstages(), max_cols_, v.flags & kStageCp ? max_in_ : 0, ring_bytes(v), xs, xq, ro);
    Params p{dstages_, nstages(), sync_, sync_ + 1, sync_ + 2, x_, out_rows_, v.pf, v.flags, xs, xq, ro};
    kernel_of(v.nw, v.d, v.u, v.bps, (v.flags & kCpRing) != 0)<<<static_cast<unsigned>(sms * v.bps), v.nw * 32, smem, s>>>(p);
    check(cudaGetLastError(), "persist2 launch");
  }

 private:
  static int ring_bytes(const Variant& v) { return v.flags & kCpRing ? v.nw * v.d * v.u * 576 : 0; }
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw df::Error(std::string("persist2 ") + what + ": " + cudaGetErrorString(e));
  }
  float* alloc(size_t n) {
    void* p = nullptr;
    check(cudaMalloc(&p, n * 4), "partials");
    bufs_.push_back(p);
    return static_cast<float*>(p);
  }
  float* x_;
  std::vector<Stage> stages_;
  std::vector<void*> bufs_;
  std::vector<int> wprs_;
  Stage* dstages_ = nullptr;
  unsigned* sync_ = nullptr;
  int max_cols_ = 0, max_in_ = 0, out_rows_ = 0;
};

}  // namespace df::cudamv::persist2
