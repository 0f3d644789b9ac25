// The decode / verify attention kernel over an F16 KV cache that serves a whole GQA group
// (the n_head / n_head_kv query heads of one key/value head) from one load of its K and V
// rows: one block per (slice, key/value head, row), the slices of attention_split (so the same
// grid at every position, and the same for every row count <= 8), partials in the layout of
// attention.cu's slice kernel and merged by the same function (attention_merge.cuh).
//
// A block walks its slice in tiles of TP positions (64; 32 at head_dim 256): every thread
// loads its 16-byte pieces of the tile's K and V rows into registers (the next tile's loads in
// flight while the current one is computed), stores them to shared memory; then the scores of
// all (head, position) pairs of the tile at once (a thread per pair), the online-softmax update
// per head (a warp per head, lanes over positions) and the V sums (a thread per dimension, all
// heads of the group). Called by launch_attention (attention.cuh) unless v1.
//
// Fused with qk_norm_rope (GqaFuse, 1..8 rows of one sequence): q is the raw projection; each
// block norms and rotates its group's query heads itself (the same device function as
// qk_norm_rope.cu: the same bits), makes the K and V rows of the call's own positions that fall
// into its slice from k and v (normed, rotated, rounded to F16 as the cache store rounds them)
// instead of reading them from the cache, and the block of a row's own position (its last
// slice) stores that row's K and V into the cache. One launch instead of two, the same bits as
// qk_norm_rope then attention. q and k are not written.
// Fused, a block issues its first tile's K / V loads before griddepcontrol.wait (the rows it
// reads there were written by earlier steps; its own positions are made after the wait), and a
// row whose only used slice is the block's writes its output directly (the bits of the merge of
// one slice) instead of partials, ticket and merge.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/rope.cuh"

namespace df::cuda {

// Group sizes (n_head / n_head_kv) the kernel serves; above: attention.cu's slice kernel.
constexpr int kGqaMaxGroup = 8;
inline bool attention_gqa_supported(const AttnArgs& a) {
  return attention_head_dim_supported(a.head_dim) && a.n_head_kv > 0 && a.n_head % a.n_head_kv == 0 &&
         a.n_head / a.n_head_kv <= kGqaMaxGroup;
}
// Ints of counters the launch uses (rows * n_head_kv <= attention_counters).
inline int64_t attention_gqa_counters(int64_t rows, const AttnArgs& a) { return rows * a.n_head_kv; }

struct GqaFuse {
  const float* k = nullptr;  // [rows, n_head_kv * head_dim], raw projections
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;
  float eps = 0.0f;
  RopeArgs rope;              // head_dim (== AttnArgs::head_dim), n_rot, theta_scale, sections
  __half* K = nullptr;        // the cache the launch reads (its rows' positions written)
  __half* V = nullptr;
  // Gated attention (qwen35): q holds each head's [query | gate], its query heads q_head_stride
  // floats apart (0: head_dim), and gate (non-null) the same rows' gates at q's strides (q +
  // head_dim); each output is multiplied by sigmoid(gate) as sigmoid_mul does: the bits of the
  // split copy, the attention and sigmoid_mul.
  int64_t q_head_stride = 0;
  const float* gate = nullptr;
};
constexpr int64_t kGqaFuseMaxRows = 8;

// Arguments as launch_attention's; scratch of attention_scratch_floats(rows, a) floats.
// fuse (may be null): the fused qk_norm_rope above (pos must be given, rows <= kGqaFuseMaxRows).
// wide: 256 threads a block instead of 128 over the same tiles (scores, V sums and loads split
// finer; unfused, the first tile's loads issued before the query heads' work, as the fused kernel
// always does): the same bits.
void launch_attention_gqa(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                          int64_t kv_stride, const int32_t* pos, int64_t pos0, const AttnArgs& a, float* scratch,
                          float* out, int64_t out_stride, cudaStream_t s, int32_t* counters, bool pdl,
                          const GqaFuse* fuse = nullptr, bool wide = false);

}  // namespace df::cuda
