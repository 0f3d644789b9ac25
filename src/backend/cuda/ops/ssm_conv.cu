#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/ssm_conv.cuh"

namespace df::cuda {
namespace {

// One thread per channel c. Fused (launch_ssm_conv_silu_l2): a block is one group of
// blockDim.x channels; each output is silu'd, and a group in [0, norm_channels) l2-normed
// through shared memory (every warp sums the group as the l2_norm kernel's warp does).
template <int K, bool Fused>
__global__ void ssm_conv_kernel(const float* x, int64_t xs, float* state, const float* w, float* y, int64_t ys,
                                int64_t n, int64_t C, float* snap, int64_t n_snap, ConvNorm cn) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  constexpr int H = K - 1;
  float win[K], wt[K];
#pragma unroll
  for (int i = 0; i < K; ++i) wt[i] = c < C ? w[c * K + i] : 0.0f;  // weights: before the wait
  pdl_wait();
  pdl_trigger();
  if (c >= C) return;  // never in a fused launch (C is a multiple of the block): no block sync is skipped
#pragma unroll
  for (int i = 0; i < H; ++i) win[i] = state[i * C + c];
  for (int64_t t = 0; t < n; ++t) {
    win[H] = x[t * xs + c];
    float acc = 0.0f;  // the CPU backend's order: i = 0 .. K-1
#pragma unroll
    for (int i = 0; i < K; ++i) acc = fmaf(win[i], wt[i], acc);
    if constexpr (Fused) {
      acc = act_silu(acc);  // the SILU kernel's function
      if (static_cast<int64_t>(blockIdx.x) * blockDim.x < cn.norm_channels) {  // the same for the whole block
        extern __shared__ float group_vals[];
        group_vals[threadIdx.x] = acc;
        __syncthreads();
        const int g = static_cast<int>(blockDim.x);
        acc = acc * l2_inv_of(g, cn.eps, [&](int i) { return group_vals[i]; });  // as l2_norm_kernel
        __syncthreads();  // every warp has read the group before the next token writes it
      }
    }
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

// Prefill (n > kConvTile rows, no snapshots, x and y apart): a thread per (channel, tile of
// kConvTile rows), every output the same fmaf chain as ssm_conv_kernel's (its bits); the tile
// at row 0 reads the old state and then writes the new one (the last K-1 rows of x: n > K-1),
// no other tile reads the state.
constexpr int kConvTile = 16;

template <int K>
__global__ void ssm_conv_tiles_kernel(const float* x, int64_t xs, float* state, const float* w, float* y, int64_t ys,
                                      int64_t n, int64_t C) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kConvTile;
  constexpr int H = K - 1;
  float win[H + kConvTile], wt[K];
#pragma unroll
  for (int i = 0; i < K; ++i) wt[i] = c < C ? w[c * K + i] : 0.0f;  // weights: before the wait
  pdl_wait();
  pdl_trigger();
  if (c >= C) return;
#pragma unroll
  for (int i = 0; i < H; ++i) {
    const int64_t row = t0 - H + i;
    win[i] = row >= 0 ? x[row * xs + c] : state[(H + row) * C + c];
  }
#pragma unroll
  for (int j = 0; j < kConvTile; ++j) win[H + j] = t0 + j < n ? x[(t0 + j) * xs + c] : 0.0f;
#pragma unroll
  for (int j = 0; j < kConvTile; ++j) {
    if (t0 + j >= n) break;
    float acc = 0.0f;  // the CPU backend's order: i = 0 .. K-1
#pragma unroll
    for (int i = 0; i < K; ++i) acc = fmaf(win[j + i], wt[i], acc);
    y[(t0 + j) * ys + c] = acc;
  }
  if (blockIdx.y == 0) {
#pragma unroll
    for (int i = 0; i < H; ++i) state[i * C + c] = x[(n - H + i) * xs + c];
  }
}

bool apart(const float* x, int64_t xs, const float* y, int64_t ys, int64_t n, int64_t C) {
  const float *xe = x + (n - 1) * xs + C, *ye = y + (n - 1) * ys + C;
  return xe <= y || ye <= x;
}

template <int K>
void launch_k(const float* x, int64_t xs, float* state, const float* w, float* y, int64_t ys, int64_t n, int64_t C,
              float* snap, int64_t n_snap, const ConvNorm* cn, cudaStream_t s, bool pdl, bool tiles) {
  if (tiles && !cn && n > kConvTile && n_snap == 0 && apart(x, xs, y, ys, n, C)) {
    const dim3 grid(static_cast<unsigned>((C + 127) / 128), static_cast<unsigned>((n + kConvTile - 1) / kConvTile));
    launch_kernel(ssm_conv_tiles_kernel<K>, grid, dim3(128), 0, s, pdl, x, xs, state, w, y, ys, n, C);
    return;
  }
  if (cn) {
    const auto g = static_cast<unsigned>(cn->group);
    launch_kernel(ssm_conv_kernel<K, true>, dim3(static_cast<unsigned>(C / cn->group)), dim3(g), g * sizeof(float), s,
                  pdl, x, xs, state, w, y, ys, n, C, snap, n_snap, *cn);
    return;
  }
  launch_kernel(ssm_conv_kernel<K, false>, dim3(static_cast<unsigned>((C + 127) / 128)), dim3(128), 0, s, pdl, x, xs,
                state, w, y, ys, n, C, snap, n_snap, ConvNorm{});
}

void launch_any(const float* x, int64_t x_stride, float* state, const float* w, float* y, int64_t y_stride, int64_t n,
                int64_t C, int K, float* snapshots, int64_t n_snapshots, const ConvNorm* cn, cudaStream_t s, bool pdl,
                bool tiles) {
  const bool known = [&]<int... Ks>(std::integer_sequence<int, Ks...>) {
    return ((K == Ks + 2
                 ? (launch_k<Ks + 2>(x, x_stride, state, w, y, y_stride, n, C, snapshots, n_snapshots, cn, s, pdl, tiles), true)
                 : false) ||
            ...);
  }(std::make_integer_sequence<int, kSsmConvMaxKernel - 1>{});
  if (!known) throw Error("cuda ssm_conv: kernel width " + std::to_string(K) + " is not in [2, 16]");
}

}  // namespace

void launch_ssm_conv(const float* x, int64_t x_stride, float* state, const float* w, float* y, int64_t y_stride,
                     int64_t n, int64_t C, int K, float* snapshots, int64_t n_snapshots, cudaStream_t s, bool pdl,
                     bool tiles) {
  if (C == 0) return;
  launch_any(x, x_stride, state, w, y, y_stride, n, C, K, snapshots, n_snapshots, nullptr, s, pdl, tiles);
  launch_check("ssm_conv");
}

void launch_ssm_conv_silu_l2(const float* x, int64_t x_stride, float* state, const float* w, float* y,
                             int64_t y_stride, int64_t n, int64_t C, int K, float* snapshots, int64_t n_snapshots,
                             const ConvNorm& norm, cudaStream_t s, bool pdl) {
  if (C == 0) return;
  if (norm.group < 32 || norm.group > 1024 || norm.group % 32 != 0 || C % norm.group != 0 ||
      norm.norm_channels < 0 || norm.norm_channels % norm.group != 0 || norm.norm_channels > C)
    throw Error("cuda ssm_conv_silu_l2: the group (" + std::to_string(norm.group) +
                ") must be a multiple of 32 up to 1024 dividing the channels and the normed channels");
  launch_any(x, x_stride, state, w, y, y_stride, n, C, K, snapshots, n_snapshots, &norm, s, pdl, false);
  launch_check("ssm_conv_silu_l2");
}

}  // namespace df::cuda
