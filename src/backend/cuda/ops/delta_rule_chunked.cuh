// Gated delta rule for prefill in the chunk-parallel form (chunks of 64 tokens, the state
// carried from chunk to chunk), the same function as delta_rule.cuh's token-by-token kernel.
// Within a chunk (G_t = sum of g over the chunk's tokens up to t, S0 the state at its start):
//   delta_t = beta_t (v_t - e^{G_t} S0 k_t) - sum_{s<t} beta_t e^{G_t - G_s} (k_t . k_s) delta_s
//   out_t   = scale (e^{G_t} S0 q_t + sum_{s<=t} e^{G_t - G_s} (q_t . k_s) delta_s)
//   S_end   = e^{G_last} S0 + sum_s e^{G_last - G_s} delta_s k_s^T
// (the recurrence unrolled; the first line is a forward substitution with the chunk's
// strictly lower triangular matrix). Rows j of the state are independent, so a block takes
// 32 rows of one value head: grid (d / 32, Hv), the 64 x 64 matrices recomputed per block.
// All f32 on CUDA cores; the state in shared memory for the whole sequence. d in {32, 64, 128}.
// No snapshots: the backend takes the token-by-token kernel when they are asked for.
#pragma once
#include <cuda_runtime_api.h>

#include "backend/cuda/ops/delta_rule.cuh"

namespace df::cuda {

bool delta_rule_chunked_supported(int32_t d);
void launch_gated_delta_rule_chunked(const DeltaRuleArgs& a, cudaStream_t s);

}  // namespace df::cuda
