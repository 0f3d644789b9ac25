// Scalar activations and the RMS-norm row scale, shared by the elementwise kernels and the
// fused epilogues / prologues of the matvec (matvec/mv_fuse.cuh): one definition, so that a
// fused and an unfused launch give the same bits.
#pragma once

namespace df::cuda {

__device__ __forceinline__ float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float act_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float act_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }
__device__ __forceinline__ float act_swiglu(float g, float u) { return act_silu(g) * u; }

// 1 / rms of a row of `cols` values read by at(c), summed by the 32 lanes of one warp: lane l
// adds c = l, l + 32, ... in order, then a butterfly over the lanes (every lane gets it).
// The butterfly and the scale from a lane's sum (rms_scale_of's and rms_scale_regs's end).
__device__ __forceinline__ float rms_scale_from_lane_sum(float sum, int cols, float eps) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return rsqrtf(sum / static_cast<float>(cols) + eps);
}
template <class At>
__device__ __forceinline__ float rms_scale_of(int cols, float eps, const At& at) {
  float sum = 0.0f;
  for (int c = static_cast<int>(threadIdx.x & 31); c < cols; c += 32) {
    const float v = at(c);
    sum = fmaf(v, v, sum);
  }
  return rms_scale_from_lane_sum(sum, cols, eps);
}
// rms_scale_of over values a lane holds already: xv[i] is column lane + 32 i (cols <= 32 KW),
// summed in the same order (the same bits).
template <int KW>
__device__ __forceinline__ float rms_scale_regs(int cols, float eps, const float (&xv)[KW]) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < KW; ++i)
    if (lane + 32 * i < cols) sum = fmaf(xv[i], xv[i], sum);
  return rms_scale_from_lane_sum(sum, cols, eps);
}
// 1 / max(|x|, eps) of a group of `group` values read by at(i) (the l2 norm's factor), summed
// by the 32 lanes of one warp as rms_scale_of sums: lane l adds i = l, l + 32, ... in order,
// then a butterfly over the lanes (every lane gets it).
template <class At>
__device__ __forceinline__ float l2_inv_of(int group, float eps, const At& at) {
  float sum = 0.0f;
  for (int i = static_cast<int>(threadIdx.x & 31); i < group; i += 32) {
    const float v = at(i);
    sum = fmaf(v, v, sum);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return 1.0f / fmaxf(sqrtf(sum), eps);
}
__device__ __forceinline__ float rms_apply(float x, float scale, float w) { return __fmul_rn(__fmul_rn(x, scale), w); }

}  // namespace df::cuda
