// Causal attention over an F16 KV cache, split over the context (flash-decoding): row r's
// query q[r] [n_head * head_dim] attends cache positions [0, last_r] with last_r = pos[r]
// (device, when given) or pos0 + r. Key/value head of query head h: h / (n_head / n_head_kv).
//
// The context capacity n_ctx is cut into n_splits slices of split_len (>= 64) positions; one
// block per (slice, head, row) runs an online softmax over its slice (4 warps, each loading 4
// positions at a time and updating in position order, each lane holding head_dim / 32 dims),
// and a second kernel (or the slices' last block, with counters) merges the slices. Slices
// past last_r exit at once, so the grid depends on the capacity only and a captured graph
// replays at any position. With one slice, the first kernel writes the output itself.
// That is the v1 kernel (one block per query head); by default launch_attention runs the GQA
// kernel of attention_gqa.cuh instead (one block per key/value head serving its group, the
// same slices and merge), where it applies (group <= 8, 16-byte aligned cache rows).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

struct AttnArgs {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;   // 32, 64, 128 or 256
  float scale = 1.0f;
  int64_t n_ctx = 0;      // cache capacity (positions)
};

struct AttnSplit {
  int32_t n_splits = 1;
  int64_t split_len = 0;
};
// The slicing used for `rows` query rows: independent of positions, and the same for every
// rows <= 8 (decode and verify batches give each row the same bits).
AttnSplit attention_split(int64_t rows, const AttnArgs& a);
// Floats of scratch the launch needs for the partial results (0 with one slice).
size_t attention_scratch_floats(int64_t rows, const AttnArgs& a);
bool attention_head_dim_supported(int32_t head_dim);
inline int64_t attention_counters(int64_t rows, const AttnArgs& a) { return rows * a.n_head; }

// K, V [n_ctx, kv_stride] halves (kv_stride = n_head_kv * head_dim); q, out row strides in floats.
// counters (may be null): attention_counters(rows, a) ints, zero before the call (and left
// zero): the slices' last block of each (row, head) merges them (no merge kernel; the same
// bits). pdl: ops/launch.cuh. v1: the one-block-per-query-head kernel (CudaOptions::attn_v1);
// wide: the GQA kernel with 256 threads (attention_gqa.cuh; CudaOptions::attn_wide).
void launch_attention(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                      int64_t kv_stride, const int32_t* pos, int64_t pos0, const AttnArgs& a, float* scratch,
                      float* out, int64_t out_stride, cudaStream_t s, int32_t* counters = nullptr,
                      bool pdl = false, bool v1 = false, bool wide = false);

}  // namespace df::cuda
