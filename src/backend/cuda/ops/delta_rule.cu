#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/launch.cuh"

namespace df::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block

// After a block of head h has written its rows of out: the head's last block to finish
// normalises and gates the head's output rows, warp w taking tokens w, w + kWarps, ...:
// rms_norm's row scale and product (activations.cuh rms_scale_of / rms_apply: the bits of the
// per-head rms_norm launch), then swiglu's act_swiglu(z, .). The other blocks' rows are read
// past L1 (__ldcg), after their fenced tickets.
template <int D>
__device__ __forceinline__ void norm_gate_head(const DeltaRuleArgs& a, int h) {
  __threadfence();  // this thread's out values are visible before the block's ticket
  __syncthreads();
  __shared__ int last;
  if (threadIdx.x == 0) {
    const int ticket = atomicAdd(a.counters + h, 1);
    last = ticket == static_cast<int>(gridDim.x) - 1;
    if (last) a.counters[h] = 0;  // every block of the head has taken its ticket: ready for the next call
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t t = warp; t < a.n; t += kWarps) {
    float* orow = a.out + t * a.out_stride + static_cast<int64_t>(h) * D;
    const float* zrow = a.z + t * a.z_stride + static_cast<int64_t>(h) * D;
    // a.d (== D) at run time, as rms_norm's cols: a constant divisor could be folded into
    // a multiply and contracted with the + eps (another rounding)
    const float scale = rms_scale_of(a.d, a.eps, [&](int c) { return __ldcg(orow + c); });
    for (int c = lane; c < D; c += 32) orow[c] = act_swiglu(zrow[c], rms_apply(__ldcg(orow + c), scale, a.norm[c]));
  }
}

// A group of G lanes keeps one state row S_h[j] (E = D / G floats a lane, in registers) over
// the whole batch; a warp holds 32 / G rows. Lane l of a group owns the columns
// l*4 + 4*G*m + {0..3} (m < E/4): the group reads each token's k and q as float4 words, and
// the groups of a warp read the same words (one broadcast). Row sums reduce over the G lanes
// of a group (log2 G shuffles, every row of the warp at once). Token t + 1's inputs are
// loaded while token t is computed (no dependence between them).
// NormGate (launch_gated_delta_rule_norm_gate): the last block of head h to finish norms and
// gates the head's output rows (norm_gate_head).
template <int D, int G, bool NormGate>
__global__ void __launch_bounds__(kWarps * 32) delta_rule_kernel(DeltaRuleArgs a) {
  constexpr int E = D / G, E4 = E / 4, RW = 32 / G;
  static_assert(E % 4 == 0 && 32 % G == 0, "lanes per row");
  const int h = blockIdx.y, lane = threadIdx.x % 32, gl = lane % G;
  const int j = (blockIdx.x * kWarps + threadIdx.x / 32) * RW + lane / G;
  const int hk = h % a.n_k_heads;
  const int64_t row = static_cast<int64_t>(h) * D + j;  // state row (h, j)
  auto col = [&](int m) { return gl * 4 + 4 * G * m; };
  pdl_wait();
  pdl_trigger();
  float S[E];
  {
    const float* srow = a.state + row * D;
#pragma unroll
    for (int m = 0; m < E4; ++m) {
      const float4 u = *reinterpret_cast<const float4*>(srow + col(m));
      S[4 * m] = u.x, S[4 * m + 1] = u.y, S[4 * m + 2] = u.z, S[4 * m + 3] = u.w;
    }
  }
  struct In {
    float4 k[E4], q[E4];
    float v, g, b;
  };
  auto load = [&](int64_t t, In& in) {
    const float* kt = a.k + t * a.k_stride + static_cast<int64_t>(hk) * D;
    const float* qt = a.q + t * a.q_stride + static_cast<int64_t>(hk) * D;
#pragma unroll
    for (int m = 0; m < E4; ++m) {
      in.k[m] = __ldg(reinterpret_cast<const float4*>(kt + col(m)));
      in.q[m] = __ldg(reinterpret_cast<const float4*>(qt + col(m)));
    }
    in.v = __ldg(a.v + t * a.v_stride + row);
    in.g = __ldg(a.g + t * a.g_stride + h);
    in.b = __ldg(a.beta + t * a.beta_stride + h);
  };
  auto group_sum = [](float x) {
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
  };
  auto step = [&](int64_t t, const In& in) {
    const float decay = expf(in.g);
    float kv[E], qv[E];
#pragma unroll
    for (int m = 0; m < E4; ++m) {
      kv[4 * m] = in.k[m].x, kv[4 * m + 1] = in.k[m].y, kv[4 * m + 2] = in.k[m].z, kv[4 * m + 3] = in.k[m].w;
      qv[4 * m] = in.q[m].x, qv[4 * m + 1] = in.q[m].y, qv[4 * m + 2] = in.q[m].z, qv[4 * m + 3] = in.q[m].w;
    }
    float sk[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // 4 partial sums: a shorter dependent chain
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] *= decay;
      sk[e % 4] = fmaf(S[e], kv[e], sk[e % 4]);
    }
    const float skr = group_sum((sk[0] + sk[1]) + (sk[2] + sk[3]));
    const float delta = (in.v - skr) * in.b;
    float sq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] = fmaf(delta, kv[e], S[e]);
      sq[e % 4] = fmaf(S[e], qv[e], sq[e % 4]);
    }
    const float sqr = group_sum((sq[0] + sq[1]) + (sq[2] + sq[3]));
    if (gl == 0) a.out[t * a.out_stride + row] = sqr * a.scale;
    if (t < a.n_snapshots) {
      float* snap = a.snapshots + (t * a.n_v_heads * D + row) * D;
#pragma unroll
      for (int m = 0; m < E4; ++m)
        *reinterpret_cast<float4*>(snap + col(m)) = make_float4(S[4 * m], S[4 * m + 1], S[4 * m + 2], S[4 * m + 3]);
    }
  };
  In in0, in1;  // ping-pong: token t + 1 loads into one while token t runs from the other
  if (a.n > 0) load(0, in0);
  for (int64_t t = 0; t < a.n; t += 2) {
    if (t + 1 < a.n) load(t + 1, in1);
    step(t, in0);
    if (t + 1 >= a.n) break;
    if (t + 2 < a.n) load(t + 2, in0);
    step(t + 1, in1);
  }
  float* srow = a.state + row * D;
#pragma unroll
  for (int m = 0; m < E4; ++m)
    *reinterpret_cast<float4*>(srow + col(m)) = make_float4(S[4 * m], S[4 * m + 1], S[4 * m + 2], S[4 * m + 3]);
  if constexpr (NormGate) norm_gate_head<D>(a, h);
}

template <int D, int G>
void launch_dg(const DeltaRuleArgs& a, bool norm_gate, cudaStream_t s) {
  constexpr int rows_per_block = kWarps * 32 / G;
  static_assert(D % rows_per_block == 0, "rows per block");
  const dim3 grid(static_cast<unsigned>(D / rows_per_block), static_cast<unsigned>(a.n_v_heads));
  if (norm_gate)
    launch_kernel(delta_rule_kernel<D, G, true>, grid, dim3(kWarps * 32), 0, s, a.pdl, a);
  else
    launch_kernel(delta_rule_kernel<D, G, false>, grid, dim3(kWarps * 32), 0, s, a.pdl, a);
}

template <int D>
bool launch_d(const DeltaRuleArgs& a, int lanes, bool norm_gate, cudaStream_t s) {
  switch (lanes) {
    case 32:
      if constexpr (D >= 128) return launch_dg<D, 32>(a, norm_gate, s), true;
      break;
    case 16:
      if constexpr (D >= 64) return launch_dg<D, 16>(a, norm_gate, s), true;
      break;
    case 8:
      if constexpr (D <= 128) return launch_dg<D, 8>(a, norm_gate, s), true;
      break;
    case 4:
      if constexpr (D <= 64) return launch_dg<D, 4>(a, norm_gate, s), true;
      break;
    default: break;
  }
  return false;
}

bool launch_lanes(const DeltaRuleArgs& a, int lanes, bool norm_gate, cudaStream_t s) {
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  if (!aligned(a.q) || !aligned(a.k) || !aligned(a.state) || (a.snapshots && !aligned(a.snapshots)) ||
      a.q_stride % 4 != 0 || a.k_stride % 4 != 0)
    throw Error("cuda gated_delta_rule: q, k, state and snapshots must be 16-byte aligned, q/k strides multiples of 4");
  bool ok = false;
  switch (a.d) {
    case 32: ok = launch_d<32>(a, lanes, norm_gate, s); break;
    case 64: ok = launch_d<64>(a, lanes, norm_gate, s); break;
    case 128: ok = launch_d<128>(a, lanes, norm_gate, s); break;
    case 256: ok = launch_d<256>(a, lanes, norm_gate, s); break;
    default: throw Error("cuda gated_delta_rule: head size " + std::to_string(a.d) + " is not 32, 64, 128 or 256");
  }
  if (ok) launch_check(norm_gate ? "gated_delta_rule_norm_gate" : "gated_delta_rule");
  return ok;
}

}  // namespace

bool delta_rule_head_size_supported(int32_t d) { return d == 32 || d == 64 || d == 128 || d == 256; }

int delta_rule_default_lanes(int32_t d) { return d >= 256 ? 16 : 8; }

bool launch_gated_delta_rule_lanes(const DeltaRuleArgs& a, int lanes, cudaStream_t s) {
  return launch_lanes(a, lanes, false, s);
}

void launch_gated_delta_rule(const DeltaRuleArgs& a, cudaStream_t s) {
  if (!launch_lanes(a, delta_rule_default_lanes(a.d), false, s))
    throw Error("cuda gated_delta_rule: no kernel for head size " + std::to_string(a.d));
}

void launch_gated_delta_rule_norm_gate(const DeltaRuleArgs& a, cudaStream_t s) {
  if (!a.z || !a.norm || !a.counters) throw Error("cuda gated_delta_rule_norm_gate: z, norm and counters are needed");
  if (!launch_lanes(a, delta_rule_default_lanes(a.d), true, s))
    throw Error("cuda gated_delta_rule_norm_gate: no kernel for head size " + std::to_string(a.d));
}

}  // namespace df::cuda
