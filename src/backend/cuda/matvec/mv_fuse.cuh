// Fusions of the matvec kernel (kernels_fast.cuh), chosen per launch at run time (no more
// template instances): up to three matrices of one type and width over the same x in one
// launch, an RMS norm of x in the prologue (the shared-memory copy of x is normed in place),
// and per matrix an epilogue (accumulate into y, sigmoid, softplus(y + bias) * scale), or a
// SwiGLU pair (two rows per warp: row r of the gate and of the up matrix, y = silu(g) * u).
// Every fused result is the bits of the unfused ops (same device functions, same order), so a
// row's result stays the same for every n whichever path a launch takes.
#pragma once
#include <cstdint>

#include "backend/cuda/ops/activations.cuh"

namespace df::cudamv {

using cuda::act_sigmoid;
using cuda::act_softplus;
using cuda::rms_apply;
using cuda::rms_scale_of;
__device__ __forceinline__ float swiglu_of(float g, float u) { return cuda::act_swiglu(g, u); }

enum class Epi : int32_t { kStore = 0, kAccumulate = 1, kSigmoid = 2, kSoftplusScale = 3 };

struct MvEpi {
  Epi op = Epi::kStore;
  const float* bias = nullptr;   // kSoftplusScale: [rows]
  const float* scale = nullptr;  // kSoftplusScale: [rows]
};

struct MvFuse {
  int32_t nmat = 1;                    // matrices: the launch's W, then q/m/rows/y[0..1]
  const uint8_t* q[2] = {nullptr, nullptr};
  const uint8_t* m[2] = {nullptr, nullptr};
  int64_t rows[2] = {0, 0};
  float* y[2] = {nullptr, nullptr};
  MvEpi epi[3];                        // per matrix
  bool swiglu = false;                 // nmat == 2: y = silu(W x) * (W1 x) (RW == 2 kernels only)
  const float* norm_w = nullptr;       // x := rms_norm(x) * norm_w first (shared-memory x only)
  float eps = 0.0f;
  // Routed experts (matvec_experts): grid row s = blockIdx.y is slot s, which runs expert
  // e = ids[s] (s < n_slots; e clamped below n_expert, negative: the block returns): matrix i's quant plane at table[i][e], its meta plane
  // at table[i][n_expert + e]; x rows from (s / x_div) * N, y rows from s * N. ids null: an ordinary launch.
  const int32_t* ids = nullptr;
  const uint8_t* const* table[2] = {nullptr, nullptr};  // W, then more[0]
  int32_t n_expert = 0, x_div = 1, n_slots = 0;
  // The expert of id n_expert outside the tables (xq[0] non-null): matrix i's quant plane xq[i],
  // meta plane xm[i] (a streamed stack's shared expert, MatvecFusion::extra); else ids at or
  // above n_expert are clamped to n_expert - 1.
  const uint8_t* xq[2] = {nullptr, nullptr};
  const uint8_t* xm[2] = {nullptr, nullptr};
  bool pdl = false;                    // host side: launched with programmatic dependent launch
  bool routed_pdl = false;             // host side: routed launches (ids) with PDL too (they wait before the ids)
  bool pipe = false;                   // host side: int8-x kernels with pipelined loads (launch.cuh Dp4aPipe)
  bool pipe_rows = false;              // host side: and so at n = 2..8 (else those n run the default loop)
  bool stage_x = false;                // int8-x kernels: x staged into shared memory by cp.async first (launch_mv)
  // int8-x launches (not routed): host side, the thread block cluster size asked for
  // (Context::set_cluster; <= 1: none); kernel side, the cluster size the launch has
  // (launch_persistent: 0 where it launched without one). The cluster's blocks round x once
  // between them (kernels_fast.cuh int8x_prologue): the same bytes, so the same bits.
  int32_t cluster = 0;
  bool float_norm = false;             // host side: the float formats take norm_w (their x in shared memory)
  // x rounded once per launch (Context::set_preround): host side, int8-x launches (not routed,
  // no cluster) whose n x cols reaches preround_min (> 0) first run xq_preround_kernel, which
  // rounds (norms first) x into xq_buf (the launch's own xq layout, n rows of xq_row_bytes);
  // kernel side, xq_global (set by launch_mv) is that buffer: every block copies it into its
  // shared memory instead of rounding x itself (int8x_prologue). The same bytes (the same
  // quantize_x_range and rms order per element), so the same bits.
  int64_t preround_min = 0;
  uint8_t* xq_buf = nullptr;
  const uint8_t* xq_global = nullptr;
  // Host side, n = 1 int8-x launches (launch.cuh launch_mv_fused): mv_kernel with its loads
  // pipe_depth steps ahead (2 or 4; 0: the format's configuration), two rows per warp, one part
  // per lane and step. routed_pipe: routed launches (ids; MatvecFusion::routed_pipe); short_pipe:
  // the others whose rows have at most 64 parts (Context::set_short_pipe). Same bits.
  int32_t routed_pipe = 0, short_pipe = 0;
  // L2 prefetch of the weights (Context::l2_prefetch): host side, l2_bytes (> 0) bounds the bytes a
  // launch prefetches and blocks_per_sm (> 0) caps the persistent grid below the occupancy (so
  // that the next launch's blocks can be resident while this one runs); launch_persistent turns
  // l2_bytes into l2_block_bytes, the bytes of its first row groups that each block prefetches
  // into L2 (cp.async.bulk.prefetch.L2) before griddepcontrol.wait. Only moves bytes into L2:
  // the same loads and sums, the same bits.
  int64_t l2_bytes = 0;
  int32_t blocks_per_sm = 0;
  int64_t l2_block_bytes = 0;
  // Workbench only (PackedWeight::trace): the per-block phase stamps of mv_kernel's traced
  // instances (kTrace, mv_trace below; the backend's instances never read it).
  uint64_t* trace = nullptr;
};

// mv_kernel's phase stamps (kTrace instances, MvFuse::trace), thread 0 of block (blockIdx.x, blockIdx.y) at
// trace + kTraceWords * (blockIdx.y * gridDim.x + blockIdx.x): [0] globaltimer at entry, [1]
// after griddepcontrol.wait, [2] at the end; [3] clock64 at entry, [4] before the wait, [5]
// after it, [6] after the x prologue, [7] at the end (after a block barrier).
constexpr int kTraceWords = 8;
__device__ __forceinline__ void mv_trace(uint64_t* trace, int clock_word, int timer_word) {
  if (!trace || threadIdx.x != 0) return;
  uint64_t* t = trace + kTraceWords * (static_cast<int64_t>(blockIdx.y) * gridDim.x + blockIdx.x);
  t[clock_word] = static_cast<uint64_t>(clock64());
  if (timer_word >= 0) {
    uint64_t g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    t[timer_word] = g;
  }
}

// Prefetches bytes (a multiple of 16, at a 16-byte aligned address) of global memory into L2.
__device__ __forceinline__ void l2_prefetch(const void* p, int64_t bytes) {
  if (bytes > 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(static_cast<uint32_t>(bytes)) : "memory");
}

// y (the output element of row `row`) from the dot s.
__device__ __forceinline__ void store_out(const MvEpi& e, float s, float* y, int64_t row) {
  switch (e.op) {
    case Epi::kStore: *y = s; break;
    case Epi::kAccumulate: *y = *y + s; break;  // as add(acc, tmp): acc + tmp
    case Epi::kSigmoid: *y = act_sigmoid(s); break;
    case Epi::kSoftplusScale: *y = act_softplus(s + e.bias[row]) * e.scale[row]; break;
  }
}

}  // namespace df::cudamv
