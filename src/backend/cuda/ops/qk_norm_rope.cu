#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/qk_norm_rope.cuh"

namespace df::cuda {
namespace {

// Does pair i carry the token position under the IMROPE text rule (rope.cu's rule)?
__device__ bool pair_rotates(const RopeArgs& a, int i) {
  const int total = a.sections[0] + a.sections[1] + a.sections[2] + a.sections[3];
  if (total == 0) return true;
  const int sector = i % total;
  return (sector % 3 == 0 && sector < 3 * a.sections[0]) || (sector % 3 == 1 && sector < 3 * a.sections[1]) ||
         (sector % 3 == 2 && sector < 3 * a.sections[2]);
}

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
  const float scale = rms_scale_of(hd, a.eps, [&](int c) { return x[c]; });  // rms_norm's order
  float* sh = head[warp];
#pragma unroll
  for (int i = 0; i < kW; ++i) {
    const int c = lane + 32 * i;
    if (c < hd) sh[c] = rms_apply(x[c], scale, wr[i]);
  }
  __syncwarp();
  const int half = a.rope.n_rot / 2;
  __half* kdst = !is_q && a.K ? a.K + static_cast<int64_t>(p) * a.kv_dim + static_cast<int64_t>(hh) * hd : nullptr;
  for (int c = lane; c < hd; c += 32) {
    float out = sh[c];
    if (c < 2 * half) {
      const int i = c < half ? c : c - half;
      if (pair_rotates(a.rope, i)) {
        float theta = static_cast<float>(p);  // p * theta_scale^i by repeated products, as rope.cu
        for (int j = 0; j < i; ++j) theta *= a.rope.theta_scale;
        float sn, cs;
        sincosf(theta, &sn, &cs);
        const float x0 = sh[i], x1 = sh[i + half];
        out = c < half ? x0 * cs - x1 * sn : x0 * sn + x1 * cs;
      }
    }
    x[c] = out;
    if (kdst) kdst[c] = __float2half_rn(out);
  }
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
