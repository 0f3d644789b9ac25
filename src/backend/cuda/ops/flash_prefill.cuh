// Causal attention for prefill (many query rows) over the F16 KV cache, on tensor cores:
// flash attention in the FlashAttention-2 form. One block of 4 warps per (64 query rows,
// query head); each warp owns 16 rows. For each 64-position tile of keys up to the largest
// position of the block's rows: K and V come into shared memory by cp.async, S = Q K^T by
// mma.sync m16n8k16 (f16, f32 accumulate; Q scaled and rounded to f16 once), the causal mask
// (key p visible to row r iff p <= pos[r]), an online softmax in registers (f32), and O += P V
// with P rounded to f16 in registers (the S accumulators are the A fragments of P V) and V
// read by ldmatrix.trans. Rows are not bit-identical to the decode kernel (attention.cuh),
// which keeps every call of <= 8 rows.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/ops/attention.cuh"

namespace df::cuda {

bool flash_prefill_supported(int32_t head_dim);  // 64, 128, 256

// q [rows, n_head * head_dim] f32 (stride q_stride floats), K, V [n_ctx, kv_stride] halves,
// pos [rows] device positions (row r sees cache positions 0 .. pos[r]); out like q.
void launch_flash_prefill(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                          int64_t kv_stride, const int32_t* pos, const AttnArgs& a, float* out, int64_t out_stride,
                          cudaStream_t s);
// The same with 1 or 2 stages of K/V tiles in shared memory (2: the next tile loads by
// cp.async while this one is used; more shared memory a block); the default per head size:
int flash_prefill_default_stages(int32_t head_dim);
void launch_flash_prefill_stages(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                                 int64_t kv_stride, const int32_t* pos, const AttnArgs& a, float* out,
                                 int64_t out_stride, int stages, cudaStream_t s);

}  // namespace df::cuda
