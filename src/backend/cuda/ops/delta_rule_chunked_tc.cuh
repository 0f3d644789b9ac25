// Gated delta rule for prefill, chunk-parallel with the chunk products on tensor cores
// (mma.sync m16n8k8 tf32, f32 sums), the same function as delta_rule.cuh's token kernel.
// The decomposition of flash-linear-attention's chunk_gated_delta_rule (WY / UT form), in
// chunks of 64 tokens. Per value head h (key head h % Hk), chunk c with tokens t, s in
// [0, 64) (G_t the sum of g over the chunk's tokens up to t, S_c the state at its start,
// rows j value dims, cols i key dims):
//   A[t][s] = beta_t e^{G_t - G_s} k_t . k_s (s < t),  T = (I + A)^-1 (forward substitution)
//   w = T (beta e^G k),  u = T (beta v)                                    [64, d] each
//   vnew = u - w S_c^T   (= the delta_t of delta_rule_chunked.cuh)          [64, d]
//   S_{c+1} = e^{G_last} S_c + sum_t e^{G_last - G_t} vnew_t k_t^T
//   out_t = scale (e^{G_t} S_c q_t + sum_{s<=t} e^{G_t - G_s} (q_t . k_s) vnew_s)
// Three launches:
//   1. prep, grid (chunks, Hv): G, the 64x64 products k k^T and q k^T (tensor cores), the
//      substitution for w and u (f32, a column a thread), the masked decayed q k^T;
//   2. state, grid (d / 32, Hv): the only sequential part, over the chunks, with the state's
//      32-row slice in the mma accumulators; writes S_c per chunk and vnew (tensor cores,
//      the next chunk's w, k, u loaded by cp.async while this one computes);
//   3. out, grid (chunks, Hv, d / 64): out from S_c, q, vnew and the masked q k^T.
// Scratch (device, delta_rule_chunked_tc_scratch_bytes): G, w, u, vnew, q k^T and S_c of every
// chunk (npad = chunks * 64 rows): at n = 2048 rows, 48 heads of 128, ~280 MB.
// `split` (3xTF32): every product's operands as hi + lo tf32 pairs (hi*hi + hi*lo + lo*hi):
// near-f32 products at three times the mma count. Without it the operands are rounded to tf32
// (relative 2^-11). d in {32, 64, 128}; q, k, v 16-byte aligned, strides multiples of 4;
// no snapshots (df::Error otherwise: the backend takes the token kernel for those).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "backend/cuda/ops/delta_rule.cuh"

namespace df::cuda {

bool delta_rule_chunked_tc_supported(const DeltaRuleArgs& a);
size_t delta_rule_chunked_tc_scratch_bytes(int64_t n, int32_t n_v_heads, int32_t d);
// The state kernel's slice of value rows a block (16, 32 or 64; d 32: 32) for Hv heads on
// n_sms multiprocessors: the smallest whose d / slice * Hv blocks fit in one wave, else 64.
int delta_rule_chunked_tc_default_slice(int32_t d, int32_t n_v_heads, int n_sms);
// scratch: at least delta_rule_chunked_tc_scratch_bytes(a.n, a.n_v_heads, a.d), 16-byte aligned;
// bv: the state kernel's slice (0: the default for this device).
void launch_gated_delta_rule_chunked_tc(const DeltaRuleArgs& a, void* scratch, bool split, int bv, cudaStream_t s);
// For the workbench: only the launches of `phases` (bit 0 prep, 1 state, 2 out; 7 all), their
// inputs in scratch from an earlier call of the same shape (timing of one launch).
void launch_gated_delta_rule_chunked_tc_phases(const DeltaRuleArgs& a, void* scratch, bool split, int bv, int phases,
                                               cudaStream_t s);

}  // namespace df::cuda
