// Causal depthwise convolution over time with a carried state (DeltaNet's short conv):
//   window = [state rows 0..K-2, x rows 0..n-1];  y[t][c] = sum_i window[t+i][c] * w[c][i]
// x [n, C] (row stride in floats), state [K-1, C] dense f32 (in/out: the last K-1 window
// rows), w [C, K] dense f32, y [n, C]. K <= 16. One thread per channel keeps its window in
// registers for the whole chunk; more than 16 rows without snapshots, x and y apart (prefill):
// a thread per channel and tile of 16 rows (the same bits, the rows in parallel).
// snapshots (may be null): slot t (t < n_snapshots) receives the state after row t, each
// slot [K-1, C] dense.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

constexpr int kSsmConvMaxKernel = 16;

// pdl: ops/launch.cuh; tiles false: the token loop at any n (the kernel before the tiles).
void launch_ssm_conv(const float* x, int64_t x_stride, float* state, const float* w, float* y, int64_t y_stride,
                     int64_t n, int64_t C, int K, float* snapshots, int64_t n_snapshots, cudaStream_t s,
                     bool pdl = false, bool tiles = true);

// DeltaNet's conv, SILU and q/k norms in one launch: launch_ssm_conv, then y = silu(y) on every
// channel, then y = y / max(|y|, eps) over each group of `group` channels of [0, norm_channels)
// (the q and k heads): the bits of launch_ssm_conv + launch_unary(SILU) + launch_l2_norm (the
// same device functions). One block of `group` threads per group (a multiple of 32, <= 1024;
// C and norm_channels multiples of it).
struct ConvNorm {
  int64_t group = 0, norm_channels = 0;
  float eps = 0.0f;
};
void launch_ssm_conv_silu_l2(const float* x, int64_t x_stride, float* state, const float* w, float* y,
                             int64_t y_stride, int64_t n, int64_t C, int K, float* snapshots, int64_t n_snapshots,
                             const ConvNorm& norm, cudaStream_t s, bool pdl = false);

}  // namespace df::cuda
