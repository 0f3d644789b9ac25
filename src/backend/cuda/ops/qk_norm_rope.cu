#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/qk_head.cuh"
#include "backend/cuda/ops/qk_norm_rope.cuh"

namespace df::cuda {
namespace {

constexpr int kWarps = 8;

// Block (x: 8 heads, y: row r); warp -> one head of q, of k, or (storing) of v.
__global__ void __launch_bounds__(kWarps * 32) qk_norm_rope_kernel(QkNormRopeArgs a) {
  __shared__ float head[kWarps][kQkMaxHeadDim];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t r = blockIdx.y;
  const int h = blockIdx.x * kWarps + warp;
  const int hd = a.rope.head_dim;
  const int n_heads = a.n_head + a.n_head_kv + (a.K ? a.n_head_kv : 0);
  const bool is_q = h < a.n_head;
  // The norm weights (constant) before the wait: they load while the previous kernel ends.
  constexpr int kW = kQkMaxHeadDim / 32;
  float wr[kW];
  if (h < a.n_head + a.n_head_kv) {
    const float* w = is_q ? a.q_norm : a.k_norm;
#pragma unroll
    for (int i = 0; i < kW; ++i) wr[i] = lane + 32 * i < hd ? __ldg(w + lane + 32 * i) : 0.0f;
  }
  pdl_wait();
  pdl_trigger();
  if (h >= n_heads) return;
  const int32_t p = a.pos[r];
  if (h >= a.n_head + a.n_head_kv) {  // a v head: store only
    const int hv = h - a.n_head - a.n_head_kv;
    const float* src = a.v + r * a.v_stride + static_cast<int64_t>(hv) * hd;
    __half* dst = a.V + static_cast<int64_t>(p) * a.kv_dim + static_cast<int64_t>(hv) * hd;
    for (int c = lane; c < hd; c += 32) dst[c] = __float2half_rn(src[c]);
    return;
  }
  const int hh = is_q ? h : h - a.n_head;
  float* x = (is_q ? a.q + r * a.q_stride : a.k + r * a.k_stride) + static_cast<int64_t>(hh) * hd;
  __half* kdst = !is_q && a.K ? a.K + static_cast<int64_t>(p) * a.kv_dim + static_cast<int64_t>(hh) * hd : nullptr;
  norm_rope_head<kW>(x, wr, a.eps, a.rope, p, head[warp], lane, [&](int c, float out) {
    x[c] = out;  // x[c] was read before (the norm, sh): each lane writes only its own dims
    if (kdst) kdst[c] = __float2half_rn(out);
  });
}

}  // namespace

void launch_qk_norm_rope(const QkNormRopeArgs& a, int64_t rows, cudaStream_t s, bool pdl) {
  if (rows == 0) return;
  if (a.rope.head_dim > kQkMaxHeadDim) throw Error("cuda qk_norm_rope: head_dim above 256");
  const int n_heads = a.n_head + a.n_head_kv + (a.K ? a.n_head_kv : 0);
  const dim3 grid(static_cast<unsigned>((n_heads + kWarps - 1) / kWarps), static_cast<unsigned>(rows));
  launch_kernel(qk_norm_rope_kernel, grid, dim3(kWarps * 32), 0, s, pdl, a);
  launch_check("qk_norm_rope");
}

}  // namespace df::cuda
