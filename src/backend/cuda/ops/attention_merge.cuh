// The merge of a (row, head)'s slice partials (flash-decoding's second step), shared by the
// attention kernels (attention.cu, attention_gqa.cu): their fused last-block merges and the
// merge kernel run this one function, so every path gives the same bits for given partials.
#pragma once
#include <cmath>

#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {

// An attention output x, times sigmoid(grow[e]) where grow is given: sigmoid_mul's arithmetic
// (elementwise.cu: x * act_sigmoid(g)) on the value the unfused kernel would have stored.
__device__ __forceinline__ float gated_out(float x, const float* grow, int e) {
  return grow ? x * act_sigmoid(grow[e]) : x;
}

// Lane `lane`'s E dims of the output of one (row, head) from the partial softmax sums of its
// first n slices (pp: the (row, head)'s slices, [m, l, acc[head_dim]] each; n <= 64): lane s
// reads slice s's max and sum, then every lane sums its dims over the slices in slice order.
// The merge kernel and the fused merge (attention_slice_kernel's last block) both run it.
// grow (may be null): the lane's E gates; each output is then multiplied by sigmoid(gate), as
// sigmoid_mul multiplies the stored output (attention_gqa.cuh GqaFuse::gate).
template <int E, bool kPastL1>
__device__ __forceinline__ void merge_slices(const float* pp, int n, int lane, float* orow,
                                             const float* grow = nullptr) {
  constexpr int HD = 32 * E;
  auto ld = [](const float* p) { return kPastL1 ? __ldcg(p) : *p; };
  float m0 = lane < n ? ld(pp + lane * (HD + 2)) : -INFINITY;
  float m1 = lane + 32 < n ? ld(pp + (lane + 32) * (HD + 2)) : -INFINITY;
  const float M = warp_max(fmaxf(m0, m1));
  const float f0 = lane < n ? expf(m0 - M) : 0.0f, f1 = lane + 32 < n ? expf(m1 - M) : 0.0f;
  const float l0 = lane < n ? ld(pp + lane * (HD + 2) + 1) : 0.0f;
  const float l1 = lane + 32 < n ? ld(pp + (lane + 32) * (HD + 2) + 1) : 0.0f;
  const float L = warp_sum(l0 * f0 + l1 * f1);
  float o[E];
#pragma unroll
  for (int e = 0; e < E; ++e) o[e] = 0.0f;
  // Unrolled: the loads of 8 slices in flight at once (the sums still in slice order).
#pragma unroll 8
  for (int s = 0; s < n; ++s) {
    const float f = __shfl_sync(0xffffffffu, s < 32 ? f0 : f1, s % 32);
    const float* q = pp + s * (HD + 2);
#pragma unroll
    for (int e = 0; e < E; ++e) o[e] += ld(q + 2 + lane * E + e) * f;
  }
  const float inv = 1.0f / L;
#pragma unroll
  for (int e = 0; e < E; ++e) orow[e] = gated_out(o[e] * inv, grow, e);
}

}  // namespace df::cuda
