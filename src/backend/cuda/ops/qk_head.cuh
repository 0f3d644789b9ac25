// One warp's work on one attention head of qk_norm_rope: the per-head RMS norm and the NeoX /
// IMROPE rotation (rope.cu's angles). qk_norm_rope.cu's kernel and the fused attention kernel
// (attention_gqa.cu) run this one function, so their q and k have the same bits.
#pragma once
#include <cuda_runtime.h>

#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/rope.cuh"

namespace df::cuda {

// Does pair i carry the token position under the IMROPE text rule (rope.cu's rule)?
__device__ __forceinline__ bool pair_rotates(const RopeArgs& a, int i) {
  const int total = a.sections[0] + a.sections[1] + a.sections[2] + a.sections[3];
  if (total == 0) return true;
  const int sector = i % total;
  return (sector % 3 == 0 && sector < 3 * a.sections[0]) || (sector % 3 == 1 && sector < 3 * a.sections[1]) ||
         (sector % 3 == 2 && sector < 3 * a.sections[2]);
}

// The rotation of pair i at position p: (cos, sin) of p * theta_scale^i by repeated products, as
// rope.cu (the serial products are the bits of the CPU's and ggml's angles).
__device__ __forceinline__ float2 rope_cs(const RopeArgs& rope, int32_t p, int i) {
  float theta = static_cast<float>(p);
  for (int j = 0; j < i; ++j) theta *= rope.theta_scale;
  float sn, cs;
  sincosf(theta, &sn, &cs);
  return make_float2(cs, sn);
}

// A lane's dims of a head row x [head_dim] (global): xv[i] = x[lane + 32 i] (0 past hd), every
// load issued before the first is used (one round trip).
template <int KW>
__device__ __forceinline__ void load_head(const float* x, int hd, int lane, float (&xv)[KW]) {
#pragma unroll
  for (int i = 0; i < KW; ++i) xv[i] = lane + 32 * i < hd ? x[lane + 32 * i] : 0.0f;
}

// A head row held by the warp (xv: load_head's layout), normed with weights wr (lane's
// w[lane + 32 i], i < KW, KW * 32 >= head_dim) and rotated at position p: emit(c, value) for the
// lane's dims c = lane, lane + 32, ... sh: head_dim floats of this warp's shared scratch (free
// again when the function returns). tab (may be null): rope_cs(rope, p, i) for i < n_rot / 2,
// made beforehand (the same bits).
template <int KW, class Emit>
__device__ __forceinline__ void norm_rope_regs(const float (&xv)[KW], const float* wr, float eps,
                                               const RopeArgs& rope, int32_t p, float* sh, int lane, Emit emit,
                                               const float2* tab = nullptr) {
  const int hd = rope.head_dim;
  const float scale = rms_scale_regs(hd, eps, xv);  // rms_norm's order
  __syncwarp();  // a previous call's reads of sh are done
#pragma unroll
  for (int i = 0; i < KW; ++i) {
    const int c = lane + 32 * i;
    if (c < hd) sh[c] = rms_apply(xv[i], scale, wr[i]);
  }
  __syncwarp();
  const int half = rope.n_rot / 2;
  for (int c = lane; c < hd; c += 32) {
    float out = sh[c];
    if (c < 2 * half) {
      const int i = c < half ? c : c - half;
      if (pair_rotates(rope, i)) {
        const float2 r = tab ? tab[i] : rope_cs(rope, p, i);
        const float cs = r.x, sn = r.y;
        const float x0 = sh[i], x1 = sh[i + half];
        // Rounded products (no contraction): every kernel inlining this gets the same bits.
        out = c < half ? __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn)) : __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
      }
    }
    emit(c, out);
  }
  __syncwarp();
}

// norm_rope_regs of x [rope.head_dim] (global), loaded by load_head first: emit may write x
// (every read is done before the first emit).
template <int KW, class Emit>
__device__ __forceinline__ void norm_rope_head(const float* x, const float* wr, float eps, const RopeArgs& rope,
                                               int32_t p, float* sh, int lane, Emit emit,
                                               const float2* tab = nullptr) {
  float xv[KW];
  load_head(x, rope.head_dim, lane, xv);
  norm_rope_regs(xv, wr, eps, rope, p, sh, lane, emit, tab);
}

}  // namespace df::cuda
