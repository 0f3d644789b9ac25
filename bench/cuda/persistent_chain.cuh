// Workbench prototype (issue 9): the whole chain of a decode step's Q4_0 matvecs in ONE
// persistent launch. One wave of 8-warp blocks (SMs x blocks per SM); a stage is one launch
// of the per-matrix chain (norm + Q|K|V, o, norm + the SwiGLU gate/up pair, down), its x the
// previous stages' output; between stages a device-wide barrier (a monotonic counter in
// global memory: red.release + ld.acquire spin). The point: every warp streams the weights
// of ITS rows of every stage through a ring of R shared-memory slots with cp.async, R - 1
// steps ahead of its products, so the loads of the next stage's first slots are in flight
// while the warp waits at the barrier and while its block rounds the next x to int8.
//
// Per stage s and warp: the stage's row units (rows of Q|K|V concatenated, or gate/up row
// pairs) go to warp groups of wpr warps (wpr = mv_wpr of the stage's launch, so a row's
// summation order is mv_kernel's): group G (of NG in the grid) takes units G, G + NG, ...;
// warp `sub` of the group takes parts t = 32 sub + k 32 wpr + lane, k = 0, 1, ... (a step:
// 32 parts = 512 bytes of quants + 64 bytes of fp16 scales: one slot). The products are
// Dp4aQ4_0::dot on the int8 x of xq.cuh (quantize_x, the norm by rms_scale_of / rms_apply),
// acc in the lane's part order, warp_sum, then the group's warps added in warp order:
// mv_kernel's arithmetic, so the bits of the chain of mv_kernel launches.
//
// Slot: [32 x 16 B quant words][64 B meta] = 576 B; shared memory = 8 R 576 + the int8 x + the
// f32 x of the widest stage (4B: R <= 39 fit in 227 KB; 27B: R <= 30).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/kernels_fast.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cudamv::persist {

constexpr int kPWarps = 8;
constexpr int kSlotBytes = 576;

// One stage = one launch of the per-matrix chain. nmat matrices of `cols` over the same x
// (pair: gate = 0, up = 1, y[0] = silu(gate) * up); units: rows summed (pair: rows[0]).
struct Stage {
  const uint8_t* q[3];
  const uint8_t* m[3];
  float* y[3];
  int rows[3];
  int nmat, pair, units, cols, wpr;
  int q_row_bytes, m_row_bytes;
  const float* x;
  const float* norm_w;  // null: no norm
  float eps;
};

struct Sync {
  unsigned* bar;   // arrivals, monotonic within a launch
  unsigned* done;  // blocks finished (the last one resets both for the next launch)
  unsigned* err;   // 1: a barrier spin gave up (grid not co-resident?)
};

__device__ __forceinline__ unsigned ld_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

// A warp's walk over its steps of the whole chain (stage, unit, sub-row, chunk). Small
// integers only: the stage's pointers are read from global memory where a step needs them
// (a struct with run-time indexed arrays in registers would live in local memory).
struct Cursor {
  const Stage* stages = nullptr;
  int blk = 0, warp = 0, grid = 1;  // this warp's block, warp in it, blocks in the grid
  int s = 0, nst = 0;
  int unit = 0, sr = 0, k = 0;
  int nparts = 0, rs = 0, sub = 0, ngroups = 0, nchunks = 0, units = 0, pair = 0, wpr = 1, rows0 = 0, rows1 = 0;
  bool valid = false;

  __host__ __device__ void enter(int s0) {
    for (s = s0; s < nst; ++s) {
      const Stage& st = stages[s];
      wpr = st.wpr, units = st.units, pair = st.pair, rows0 = st.rows[0], rows1 = st.rows[1];
      const int gpb = kPWarps / wpr;
      sub = warp % wpr;
      const int first = blk * gpb + warp / wpr;
      ngroups = grid * gpb;
      nparts = st.cols / 32;
      rs = 32 * wpr;
      nchunks = (nparts - 32 * sub + rs - 1) / rs;
      if (first < units && nchunks > 0) {
        unit = first, sr = 0, k = 0, valid = true;
        return;
      }
    }
    valid = false;
  }
  __host__ __device__ void advance() {
    if (++k < nchunks) return;
    k = 0;
    if (pair && sr == 0) {
      sr = 1;
      return;
    }
    sr = 0;
    unit += ngroups;
    if (unit < units) return;
    enter(s + 1);
  }
  // The current row's matrix and row within it.
  __host__ __device__ void row_of(int& mat, int& row) const {
    if (pair) {
      mat = sr, row = unit;
      return;
    }
    mat = unit < rows0 ? 0 : unit < rows0 + rows1 ? 1 : 2;
    row = mat == 0 ? unit : mat == 1 ? unit - rows0 : unit - rows0 - rows1;
  }
  __host__ __device__ int t_first() const { return 32 * sub + k * rs; }
  __host__ __device__ bool last_chunk() const { return k + 1 == nchunks; }
};

// Issues the cp.async copies of the cursor's step into slot (every lane; one commit group).
__device__ __forceinline__ void issue(const Cursor& c, uint8_t* slot) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (c.valid) {
    int mat, row;
    c.row_of(mat, row);
    const Stage& st = c.stages[c.s];
    const int t0 = c.t_first();
    const uint8_t* q = st.q[mat] + static_cast<int64_t>(row) * st.q_row_bytes;
    const uint8_t* m = st.m[mat] + static_cast<int64_t>(row) * st.m_row_bytes;
    if (t0 + lane < c.nparts) cp16(slot + 16 * lane, q + 16 * (t0 + lane));
    if (lane < 4 && 2 * t0 + 16 * lane < 2 * c.nparts) cp16(slot + 512 + 16 * lane, m + 2 * t0 + 16 * lane);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// x [cols] into shared memory (the block; ends synchronised).
__device__ __forceinline__ void load_x(float* xs, const float* x, int cols) {
  constexpr int kB = 8;
  const int n4 = cols / 4, nt = static_cast<int>(blockDim.x);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* xs4 = reinterpret_cast<float4*>(xs);
  for (int base = static_cast<int>(threadIdx.x); base < n4; base += kB * nt) {
    float4 r[kB];
#pragma unroll
    for (int u = 0; u < kB; ++u) r[u] = base + u * nt < n4 ? __ldcg(x4 + base + u * nt) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int u = 0; u < kB; ++u)
      if (base + u * nt < n4) xs4[base + u * nt] = r[u];
  }
  __syncthreads();
}

// R: slots per warp; kSleep: __nanosleep in the barrier spin.
template <int R, bool kSleep>
__global__ void __launch_bounds__(kPWarps * 32, 1)
    chain_kernel(const Stage* __restrict__ stages, int nstages, Sync sync, int xq_offset, int xs_offset) {
  extern __shared__ float4 psmem4[];
  uint8_t* smem = reinterpret_cast<uint8_t*>(psmem4);
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  uint8_t* ring = smem + warp * R * kSlotBytes;
  uint8_t* xq = smem + xq_offset;
  float* xs = reinterpret_cast<float*>(smem + xs_offset);
  __shared__ float red[kPWarps][2];
  __shared__ float row_scale;

  Cursor ld, cp;
  ld.stages = cp.stages = stages;
  ld.nst = cp.nst = nstages;
  ld.blk = cp.blk = static_cast<int>(blockIdx.x), ld.warp = cp.warp = warp, ld.grid = cp.grid = static_cast<int>(gridDim.x);
  ld.enter(0);
  cp.enter(0);
#pragma unroll 1
  for (int i = 0; i < R - 1; ++i) {
    issue(ld, ring + i * kSlotBytes);
    if (ld.valid) ld.advance();
  }
  int slot = 0;
  float acc = 0.0f, gate = 0.0f;
#pragma unroll 1
  for (int s = 0; s < nstages; ++s) {
    const Stage& S = stages[s];
    if (s > 0) {  // every block's outputs of stage s - 1 written
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        red_release_add(sync.bar, 1);
        const unsigned target = static_cast<unsigned>(s) * gridDim.x;
        long spins = 0;
        while (ld_acquire(sync.bar) < target) {
          if constexpr (kSleep) __nanosleep(64);
          if (++spins > (1l << 22)) {
            atomicExch(sync.err, 1u);
            break;
          }
        }
      }
      __syncthreads();
    }
    // x of the stage (this launch's output: read through L2, never the non-coherent path)
    // copied to shared memory in batches of independent loads (one L2 round trip per 8 float4
    // a thread: a load per element in order would take one per element), then normed and
    // rounded to int8 as mv_kernel's prologue (rms_scale_of by warp 0 over the same values).
    const int cols = S.cols;
    load_x(xs, S.x, cols);
    if (S.norm_w) {
      const float* nw = S.norm_w;
      if (warp == 0) {
        const float sc = cuda::rms_scale_of(cols, S.eps, [&](int c) { return xs[c]; });
        if (lane == 0) row_scale = sc;
      }
      __syncthreads();
      const float sc = row_scale;
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
    const int xq_rb = static_cast<int>(xq_row_bytes(cols));
    // The warp's steps of stage s (the group's warps walk the same units: the named barriers match).
#pragma unroll 1
    while (cp.valid && cp.s == s) {
      __syncwarp();  // every lane done with the slot that the next issue overwrites
      issue(ld, ring + ((slot + R - 1) % R) * kSlotBytes);
      if (ld.valid) ld.advance();
      asm volatile("cp.async.wait_group %0;" ::"n"(R - 1) : "memory");
      __syncwarp();  // the meta bytes other lanes copied
      const uint8_t* sl = ring + slot * kSlotBytes;
      const int t = cp.t_first() + lane;
      if (t < cp.nparts) {
        const uint4 q[1] = {*reinterpret_cast<const uint4*>(sl + 16 * lane)};
        const Dp4aQ4_0::Meta mt{*reinterpret_cast<const uint16_t*>(sl + 512 + 2 * lane)};
        const XQ xa{xq + t * 16, xq + cols + t * 8, xq_rb, cp.nparts * 16};
        float a1[1] = {acc};
        Dp4aQ4_0::dot<1>(q, mt, xa, a1);
        acc = a1[0];
      }
      slot = slot + 1 == R ? 0 : slot + 1;
      if (cp.last_chunk()) {
        const float res = cuda::warp_sum(acc);
        acc = 0.0f;
        int mat, row;
        cp.row_of(mat, row);
        if (cp.pair && cp.sr == 0) {
          gate = res;
        } else {
          const int wpr = cp.wpr;
          float g = cp.pair ? gate : res, u = res;
          if (wpr > 1) {  // the group's warps' sums, added in warp order by its first warp
            const unsigned id = 1u + static_cast<unsigned>(warp / wpr), n = 32u * static_cast<unsigned>(wpr);
            if (lane == 0) red[warp][0] = g, red[warp][1] = u;
            asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
            if (cp.sub == 0 && lane == 0)
              for (int w = 1; w < wpr; ++w) g += red[warp + w][0], u += red[warp + w][1];
            asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
          }
          if (cp.sub == 0 && lane == 0) {
            float* y = stages[s].y[cp.pair ? 0 : mat];
            y[row] = cp.pair ? swiglu_of(g, u) : g;
          }
        }
      }
      cp.advance();
    }
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(sync.done, 1u) == gridDim.x - 1) {  // every block is past its last barrier
      *sync.bar = 0;
      *sync.done = 0;
      __threadfence();
    }
  }
}

// Host side: a variant (R slots per warp, sleep in the spin, blocks per SM; 0: as many as fit).
struct Variant {
  int ring, sleep, per_sm;
};

using ChainKernel = void (*)(const Stage*, int, Sync, int, int);
inline ChainKernel kernel_of(int ring, bool sleep) {
  switch (ring * 2 + (sleep ? 1 : 0)) {
    case 4 * 2: return chain_kernel<4, false>;
    case 8 * 2: return chain_kernel<8, false>;
    case 16 * 2: return chain_kernel<16, false>;
    case 16 * 2 + 1: return chain_kernel<16, true>;
    case 24 * 2: return chain_kernel<24, false>;
    case 32 * 2: return chain_kernel<32, false>;
    case 32 * 2 + 1: return chain_kernel<32, true>;
    case 36 * 2: return chain_kernel<36, false>;
    default: return nullptr;
  }
}

// Shared memory of a launch: the rings, the int8 x and the f32 x of the widest stage.
inline size_t smem_of(int ring, int max_cols, int& xq_offset, int& xs_offset) {
  xq_offset = kPWarps * ring * kSlotBytes;
  xs_offset = xq_offset + static_cast<int>(xq_row_bytes(max_cols));
  return static_cast<size_t>(xs_offset) + 4 * static_cast<size_t>(max_cols);
}

}  // namespace df::cudamv::persist
