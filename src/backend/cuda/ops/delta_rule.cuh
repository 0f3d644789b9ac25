// Gated delta rule (Gated DeltaNet), token by token, with the state in registers. Per value
// head h (key head h % Hk) with state S_h [d rows j (value dim), d cols i (key dim)]:
//   S_h *= exp(g[t][h]);  delta_j = (v_j - S_h[j] . k) * beta[t][h];  S_h[j] += delta_j * k;
//   out[t][h*d + j] = (S_h[j] . q) * scale
// Rows j are independent: a group of G lanes per (h, j) keeps row S_h[j] (d / G floats per
// lane) in registers over the whole chunk and writes it back once (G = 32: a warp per row).
// q, k [n, Hk*d], v [n, Hv*d], g, beta [n, Hv], out [n, Hv*d] (row strides in floats);
// state [Hv*d, d] dense. snapshots (may be null): slot t (t < n_snapshots) receives the state
// after row t, each slot [Hv*d, d] dense. d in {32, 64, 128, 256}.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

struct DeltaRuleArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* g = nullptr;
  int64_t g_stride = 0;
  const float* beta = nullptr;
  int64_t beta_stride = 0;
  float* state = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
  float* snapshots = nullptr;
  int64_t n_snapshots = 0;
  int64_t n = 0;       // tokens
  int32_t d = 0;       // head size
  int32_t n_k_heads = 0;
  int32_t n_v_heads = 0;
  float scale = 1.0f;
  bool pdl = false;    // launched with programmatic dependent launch (ops/launch.cuh)
  // launch_gated_delta_rule_norm_gate only: z [n, Hv*d] (row stride in floats), norm [d]
  // dense, eps, and n_v_heads counters (zero; left zero).
  const float* z = nullptr;
  int64_t z_stride = 0;
  const float* norm = nullptr;
  float eps = 0.0f;
  int32_t* counters = nullptr;
};

bool delta_rule_head_size_supported(int32_t d);
void launch_gated_delta_rule(const DeltaRuleArgs& a, cudaStream_t s);  // the default lanes per row
// The lanes per row the backend uses for head size d.
int delta_rule_default_lanes(int32_t d);
// With G = `lanes` lanes per state row (d 32: 8, 4; 64: 16, 8, 4; 128: 32, 16, 8; 256: 32,
// 16: d / G a multiple of 4, at most 16 floats a lane); false when that G is not built for d.
// Same function as every other G (another summation order inside a row sum). q, k, state and
// snapshots 16-byte aligned, q/k strides multiples of 4 (df::Error otherwise).
bool launch_gated_delta_rule_lanes(const DeltaRuleArgs& a, int lanes, cudaStream_t s);
// The delta rule (the default lanes), then per value head h and token t the head norm and the
// gate of the DeltaNet output: out[t][h*d + j] = silu(z[t][h*d + j]) * rms_norm(out[t][h*d ..
// h*d + d), norm, eps)[j], done by the last of the head's blocks to finish (a ticket in
// counters[h], which it resets). The bits of launch_gated_delta_rule + launch_rms_norm over rows
// of d + launch_swiglu(z, out, out) (their device functions, the same order).
void launch_gated_delta_rule_norm_gate(const DeltaRuleArgs& a, cudaStream_t s);

}  // namespace df::cuda
