#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/attention_gqa.cuh"
#include "backend/cuda/ops/attention_merge.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kUnroll = 4;       // positions a warp loads at once
// Slices of >= 64 positions (a warp then walks <= 16 of them, 4 loads at a time): decode is
// latency-bound per warp, not by bytes (256-position slices cost ~50 us a layer at 700
// positions on the H200, profiled).
constexpr int64_t kMinSplitLen = 64;
constexpr int kMaxSplits = 64;  // the merge reads two slices per lane
constexpr int64_t kMaxSplitBlocks = 16384;  // 8 rows * n_head * n_splits above this: fewer slices

template <int E>
__device__ __forceinline__ void load_halves(const __half* p, float* out) {
  if constexpr (E == 1) {
    out[0] = __half2float(*p);
  } else {
#pragma unroll
    for (int e = 0; e < E; e += 2) {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(p + e));
      out[e] = f.x, out[e + 1] = f.y;
    }
  }
}

// part layout per (row, head, slice): [m, l, acc[head_dim]]. counters (may be null): one int
// per (row, head), zero between calls: the last used slice of a (row, head) to finish merges
// (no merge kernel); slices past the row's position then exit at once.
template <int E>
__global__ void __launch_bounds__(kWarps * 32)
    attention_slice_kernel(const float* q, int64_t qs, const __half* K, const __half* V, int64_t kvs,
                           const int32_t* pos, int64_t pos0, AttnArgs a, AttnSplit sp, float* part, float* out,
                           int64_t os, int32_t* counters) {
  constexpr int HD = 32 * E;
  const int slice = blockIdx.x, h = blockIdx.y;
  const int64_t r = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  pdl_wait();
  pdl_trigger();
  const int64_t last = pos ? pos[r] : pos0 + r;
  const int64_t used64 = last / sp.split_len + 1;
  const int used = static_cast<int>(used64 < sp.n_splits ? used64 : sp.n_splits);
  if (counters && sp.n_splits > 1 && slice >= used) return;
  const int64_t s0 = slice * sp.split_len;
  const int64_t s1 = min(s0 + sp.split_len, last + 1);
  const int hk = h / (a.n_head / a.n_head_kv);
  __shared__ float sm_m[kWarps], sm_l[kWarps];
  __shared__ float sm_acc[kWarps][HD];

  float qv[E], acc[E];
  const float* qr = q + r * qs + static_cast<int64_t>(h) * HD + lane * E;
#pragma unroll
  for (int e = 0; e < E; ++e) qv[e] = qr[e] * a.scale, acc[e] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const int64_t off = static_cast<int64_t>(hk) * HD + lane * E;
  // A warp takes positions s0 + warp, + kWarps, ...; kUnroll of them at a time: their K and V
  // rows load together (one memory latency for kUnroll positions, not one each), then the
  // online-softmax updates run position by position in the same order (the same bits as one
  // position at a time).
  for (int64_t p0 = s0 + warp; p0 < s1; p0 += kUnroll * kWarps) {
    float kv[kUnroll][E], vv[kUnroll][E];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t p = p0 + u * kWarps;
      if (p < s1) {
        load_halves<E>(K + p * kvs + off, kv[u]);
        load_halves<E>(V + p * kvs + off, vv[u]);
      }
    }
    float sc[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float s = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) s = fmaf(qv[e], kv[u][e], s);
      sc[u] = s;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) sc[u] = warp_sum(sc[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (p0 + u * kWarps >= s1) break;
      const float s = sc[u];
      const float mn = fmaxf(m, s);
      const float c = expf(m - mn), w = expf(s - mn);
      l = l * c + w;
#pragma unroll
      for (int e = 0; e < E; ++e) acc[e] = fmaf(w, vv[u][e], acc[e] * c);
      m = mn;
    }
  }
  if (lane == 0) sm_m[warp] = m, sm_l[warp] = l;
#pragma unroll
  for (int e = 0; e < E; ++e) sm_acc[warp][lane * E + e] = acc[e];
  __syncthreads();
  if (warp != 0) return;
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_m[w]);
  float L = 0.0f, o[E];
#pragma unroll
  for (int e = 0; e < E; ++e) o[e] = 0.0f;
  if (M != -INFINITY) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = expf(sm_m[w] - M);  // 0 for an empty warp (m = -inf)
      L += sm_l[w] * f;
#pragma unroll
      for (int e = 0; e < E; ++e) o[e] += sm_acc[w][lane * E + e] * f;
    }
  }
  if (sp.n_splits == 1) {
    float* orow = out + r * os + static_cast<int64_t>(h) * HD + lane * E;
    const float inv = 1.0f / L;
#pragma unroll
    for (int e = 0; e < E; ++e) orow[e] = o[e] * inv;
    return;
  }
  float* pp = part + ((r * a.n_head + h) * sp.n_splits + slice) * (HD + 2);
  if (lane == 0) pp[0] = M, pp[1] = L;
#pragma unroll
  for (int e = 0; e < E; ++e) pp[2 + lane * E + e] = o[e];
  if (!counters) return;
  __threadfence();  // this slice's partial is visible before its ticket
  __syncwarp();
  int ticket = 0;
  int32_t* counter = counters + r * a.n_head + h;
  if (lane == 0) ticket = atomicAdd(counter, 1);
  ticket = __shfl_sync(0xffffffffu, ticket, 0);
  if (ticket != used - 1) return;
  // The last used slice: the others' partials are written (fenced before their tickets).
  if (lane == 0) *counter = 0;  // ready for the next call (graph replays included)
  __threadfence();
  merge_slices<E, true>(part + (r * a.n_head + h) * sp.n_splits * (HD + 2), used, lane,
                        out + r * os + static_cast<int64_t>(h) * HD + lane * E);
}

// One warp per (head, row): merges the partial softmax sums of the slices that hold
// positions <= last (lane s reads slice s's max and sum, s < 64).
template <int E>
__global__ void attention_merge_kernel(const float* part, const int32_t* pos, int64_t pos0, AttnArgs a, AttnSplit sp,
                                       float* out, int64_t os) {
  constexpr int HD = 32 * E;
  const int h = blockIdx.x;
  const int64_t r = blockIdx.y;
  const int lane = threadIdx.x;
  pdl_wait();
  pdl_trigger();
  const int64_t last = pos ? pos[r] : pos0 + r;
  const int64_t used = last / sp.split_len + 1;
  const int n = static_cast<int>(used < sp.n_splits ? used : sp.n_splits);
  merge_slices<E, false>(part + (r * a.n_head + h) * sp.n_splits * (HD + 2), n, lane,
                         out + r * os + static_cast<int64_t>(h) * HD + lane * E);
}

template <int E>
void launch_e(const float* q, int64_t qs, int64_t rows, const __half* K, const __half* V, int64_t kvs,
              const int32_t* pos, int64_t pos0, const AttnArgs& a, const AttnSplit& sp, float* scratch, float* out,
              int64_t os, int32_t* counters, cudaStream_t s, bool pdl) {
  const dim3 grid(static_cast<unsigned>(sp.n_splits), static_cast<unsigned>(a.n_head), static_cast<unsigned>(rows));
  launch_kernel(attention_slice_kernel<E>, grid, dim3(kWarps * 32), 0, s, pdl, q, qs, K, V, kvs, pos, pos0, a, sp,
                scratch, out, os, counters);
  launch_check("attention");
  if (sp.n_splits > 1 && !counters) {
    launch_kernel(attention_merge_kernel<E>, dim3(static_cast<unsigned>(a.n_head), static_cast<unsigned>(rows)),
                  dim3(32), 0, s, pdl, scratch, pos, pos0, a, sp, out, os);
    launch_check("attention merge");
  }
}

}  // namespace

AttnSplit attention_split(int64_t rows, const AttnArgs& a) {
  AttnSplit sp;
  int64_t n = std::min<int64_t>(kMaxSplits, (a.n_ctx + kMinSplitLen - 1) / kMinSplitLen);
  // Batches of up to 8 rows (decode, verify) slice as 8 rows would: a row's result does not
  // depend on how many rows the call has.
  const int64_t r = std::max<int64_t>(rows, 8);
  while (n > 1 && r * a.n_head * n > kMaxSplitBlocks) n /= 2;
  sp.n_splits = static_cast<int32_t>(std::max<int64_t>(1, n));
  sp.split_len = (a.n_ctx + sp.n_splits - 1) / sp.n_splits;
  return sp;
}

size_t attention_scratch_floats(int64_t rows, const AttnArgs& a) {
  const AttnSplit sp = attention_split(rows, a);
  if (sp.n_splits == 1) return 0;
  return static_cast<size_t>(rows * a.n_head * sp.n_splits) * static_cast<size_t>(a.head_dim + 2);
}

bool attention_head_dim_supported(int32_t hd) { return hd == 32 || hd == 64 || hd == 128 || hd == 256; }

void launch_attention(const float* q, int64_t q_stride, int64_t rows, const __half* K, const __half* V,
                      int64_t kv_stride, const int32_t* pos, int64_t pos0, const AttnArgs& a, float* scratch,
                      float* out, int64_t out_stride, cudaStream_t s, int32_t* counters, bool pdl, bool v1, bool wide) {
  if (rows == 0) return;
  const bool aligned = ((reinterpret_cast<uintptr_t>(K) | reinterpret_cast<uintptr_t>(V)) & 15u) == 0 &&
                       kv_stride % 8 == 0;
  if (!v1 && aligned && attention_gqa_supported(a)) {
    launch_attention_gqa(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, scratch, out, out_stride, s, counters, pdl,
                         nullptr, wide);
    return;
  }
  const AttnSplit sp = attention_split(rows, a);
  switch (a.head_dim) {
    case 32: launch_e<1>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, sp, scratch, out, out_stride, counters, s, pdl); break;
    case 64: launch_e<2>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, sp, scratch, out, out_stride, counters, s, pdl); break;
    case 128: launch_e<4>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, sp, scratch, out, out_stride, counters, s, pdl); break;
    case 256: launch_e<8>(q, q_stride, rows, K, V, kv_stride, pos, pos0, a, sp, scratch, out, out_stride, counters, s, pdl); break;
    default: throw Error("cuda attention: head_dim " + std::to_string(a.head_dim) + " is not 32, 64, 128 or 256");
  }
}

}  // namespace df::cuda
