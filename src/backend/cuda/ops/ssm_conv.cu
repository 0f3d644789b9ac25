#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/ssm_conv.cuh"

namespace df::cuda {
namespace {

template <int K>
__global__ void ssm_conv_kernel(const float* x, int64_t xs, float* state, const float* w, float* y, int64_t ys,
                                int64_t n, int64_t C, float* snap, int64_t n_snap) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  constexpr int H = K - 1;
  float win[K], wt[K];
#pragma unroll
  for (int i = 0; i < K; ++i) wt[i] = c < C ? w[c * K + i] : 0.0f;  // weights: before the wait
  pdl_wait();
  pdl_trigger();
  if (c >= C) return;
#pragma unroll
  for (int i = 0; i < H; ++i) win[i] = state[i * C + c];
  for (int64_t t = 0; t < n; ++t) {
    win[H] = x[t * xs + c];
    float acc = 0.0f;  // the CPU backend's order: i = 0 .. K-1
#pragma unroll
    for (int i = 0; i < K; ++i) acc = fmaf(win[i], wt[i], acc);
    y[t * ys + c] = acc;
#pragma unroll
    for (int i = 0; i < H; ++i) win[i] = win[i + 1];
    if (t < n_snap) {
#pragma unroll
      for (int i = 0; i < H; ++i) snap[(t * H + i) * C + c] = win[i];
    }
  }
#pragma unroll
  for (int i = 0; i < H; ++i) state[i * C + c] = win[i];
}

template <int K>
void launch_k(const float* x, int64_t xs, float* state, const float* w, float* y, int64_t ys, int64_t n, int64_t C,
              float* snap, int64_t n_snap, cudaStream_t s, bool pdl) {
  launch_kernel(ssm_conv_kernel<K>, dim3(static_cast<unsigned>((C + 127) / 128)), dim3(128), 0, s, pdl, x, xs, state, w,
                y, ys, n, C, snap, n_snap);
}

}  // namespace

void launch_ssm_conv(const float* x, int64_t x_stride, float* state, const float* w, float* y, int64_t y_stride,
                     int64_t n, int64_t C, int K, float* snapshots, int64_t n_snapshots, cudaStream_t s, bool pdl) {
  if (C == 0) return;
  const bool known = [&]<int... Ks>(std::integer_sequence<int, Ks...>) {
    return ((K == Ks + 2 ? (launch_k<Ks + 2>(x, x_stride, state, w, y, y_stride, n, C, snapshots, n_snapshots, s, pdl), true)
                         : false) ||
            ...);
  }(std::make_integer_sequence<int, kSsmConvMaxKernel - 1>{});
  if (!known) throw Error("cuda ssm_conv: kernel width " + std::to_string(K) + " is not in [2, 16]");
  launch_check("ssm_conv");
}

}  // namespace df::cuda
