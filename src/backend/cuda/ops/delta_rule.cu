#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {
namespace {

constexpr int kRowsPerBlock = 4;  // warps per block

template <int E>
__global__ void __launch_bounds__(kRowsPerBlock * 32) delta_rule_kernel(DeltaRuleArgs a) {
  constexpr int D = 32 * E;
  const int h = blockIdx.y;
  const int j = blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int hk = h % a.n_k_heads;
  const int64_t row = static_cast<int64_t>(h) * D + j;  // state row (h, j)
  float* srow = a.state + row * D + lane * E;
  float S[E];
#pragma unroll
  for (int e = 0; e < E; ++e) S[e] = srow[e];
  for (int64_t t = 0; t < a.n; ++t) {
    const float* kt = a.k + t * a.k_stride + hk * D + lane * E;
    const float* qt = a.q + t * a.q_stride + hk * D + lane * E;
    const float decay = expf(a.g[t * a.g_stride + h]);
    const float b = a.beta[t * a.beta_stride + h];
    float kv[E], qv[E];
#pragma unroll
    for (int e = 0; e < E; ++e) kv[e] = kt[e], qv[e] = qt[e];
    float sk = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] *= decay;
      sk = fmaf(S[e], kv[e], sk);
    }
    sk = warp_sum(sk);
    const float delta = (a.v[t * a.v_stride + h * D + j] - sk) * b;
    float sq = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      S[e] = fmaf(delta, kv[e], S[e]);
      sq = fmaf(S[e], qv[e], sq);
    }
    sq = warp_sum(sq);
    if (lane == 0) a.out[t * a.out_stride + h * D + j] = sq * a.scale;
    if (t < a.n_snapshots) {
      float* snap = a.snapshots + (t * a.n_v_heads * D + row) * D + lane * E;
#pragma unroll
      for (int e = 0; e < E; ++e) snap[e] = S[e];
    }
  }
#pragma unroll
  for (int e = 0; e < E; ++e) srow[e] = S[e];
}

template <int E>
void launch_e(const DeltaRuleArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(32 * E / kRowsPerBlock), static_cast<unsigned>(a.n_v_heads));
  delta_rule_kernel<E><<<grid, kRowsPerBlock * 32, 0, s>>>(a);
}

}  // namespace

bool delta_rule_head_size_supported(int32_t d) { return d == 32 || d == 64 || d == 128 || d == 256; }

void launch_gated_delta_rule(const DeltaRuleArgs& a, cudaStream_t s) {
  switch (a.d) {
    case 32: launch_e<1>(a, s); break;
    case 64: launch_e<2>(a, s); break;
    case 128: launch_e<4>(a, s); break;
    case 256: launch_e<8>(a, s); break;
    default: throw Error("cuda gated_delta_rule: head size " + std::to_string(a.d) + " is not 32, 64, 128 or 256");
  }
  launch_check("gated_delta_rule");
}

}  // namespace df::cuda
