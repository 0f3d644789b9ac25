#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/decode.cuh"
#include "backend/cuda/ops/matmul.cuh"
#include "backend/cuda/ops/reduce.cuh"

namespace df::cuda {
namespace {

constexpr int kMvWarps = 4;

template <class Dec>
__global__ void __launch_bounds__(kMvWarps * 32)
    matvec_simple_kernel(const uint8_t* W, size_t ws, int64_t m, int64_t k, const float* x, int64_t xs, int n,
                         float* y, int64_t ys) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kMvWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= m) return;
  const uint8_t* wr = W + static_cast<size_t>(row) * ws;
  float acc[kMatvecMaxRows] = {};
  for (int64_t c = lane; c < k / 32; c += 32) {
    float w[32];
    Dec::chunk(wr, c, w);
#pragma unroll
    for (int r = 0; r < kMatvecMaxRows; ++r) {
      if (r >= n) break;
      const float4* xr = reinterpret_cast<const float4*>(x + r * xs + c * 32);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float4 v = xr[i];
        acc[r] = fmaf(w[4 * i], v.x, acc[r]);
        acc[r] = fmaf(w[4 * i + 1], v.y, acc[r]);
        acc[r] = fmaf(w[4 * i + 2], v.z, acc[r]);
        acc[r] = fmaf(w[4 * i + 3], v.w, acc[r]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kMatvecMaxRows; ++r) {
    if (r >= n) break;
    const float s = warp_sum(acc[r]);
    if (lane == 0) y[r * ys + row] = s;
  }
}

constexpr int kTile = 64, kTileK = 32, kTileThreads = 256;

template <class Dec>
__global__ void __launch_bounds__(kTileThreads)
    matmul_tiled_kernel(const uint8_t* W, size_t ws, int64_t m, int64_t k, const float* x, int64_t xs, int64_t n,
                        float* y, int64_t ys) {
  __shared__ float Wt[kTileK][kTile + 1];  // [k][m]
  __shared__ float Xt[kTileK][kTile + 1];  // [k][n]
  const int t = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTile, n0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = t % 16, ty = t / 16;
  float acc[4][4] = {};
  for (int64_t c = 0; c < k / kTileK; ++c) {
    if (t < kTile) {
      float w[32];
      if (m0 + t < m) {
        Dec::chunk(W + static_cast<size_t>(m0 + t) * ws, c, w);
      } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) w[i] = 0.0f;
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) Wt[i][t] = w[i];
    }
    {
      const int r = t / 4, c8 = (t % 4) * 8;
      const bool in = n0 + r < n;
      const float* xr = x + (n0 + r) * xs + c * kTileK + c8;
#pragma unroll
      for (int i = 0; i < 8; ++i) Xt[c8 + i][r] = in ? xr[i] : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = Wt[kk][tx * 4 + i], b[i] = Xt[kk][ty * 4 + i];
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[j][i] = fmaf(a[i], b[j], acc[j][i]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t r = n0 + ty * 4 + j;
    if (r >= n) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t col = m0 + tx * 4 + i;
      if (col < m) y[r * ys + col] = acc[j][i];
    }
  }
}

}  // namespace

bool matmul_tiled_supported(GgmlType type) {
  return with_decoder(type, [](auto) {});
}

void launch_matvec_simple(GgmlType type, const void* W, size_t w_stride, int64_t m, int64_t k, const float* x,
                          int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s) {
  if (n > kMatvecMaxRows) throw Error("cuda matvec: more than 8 rows");
  if (m == 0 || n == 0) return;
  const bool ok = with_decoder(type, [&](auto dec) {
    using Dec = decltype(dec);
    matvec_simple_kernel<Dec><<<static_cast<unsigned>((m + kMvWarps - 1) / kMvWarps), kMvWarps * 32, 0, s>>>(
        static_cast<const uint8_t*>(W), w_stride, m, k, x, x_stride, static_cast<int>(n), y, y_stride);
  });
  if (!ok) throw Error("cuda matvec: no device decoder for " + std::string(type_name(type)));
  launch_check("matvec_simple");
}

void launch_matmul_tiled(GgmlType type, const void* W, size_t w_stride, int64_t m, int64_t k, const float* x,
                         int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s) {
  if (m == 0 || n == 0) return;
  const dim3 grid(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
  const bool ok = with_decoder(type, [&](auto dec) {
    using Dec = decltype(dec);
    matmul_tiled_kernel<Dec><<<grid, kTileThreads, 0, s>>>(static_cast<const uint8_t*>(W), w_stride, m, k, x,
                                                            x_stride, n, y, y_stride);
  });
  if (!ok) throw Error("cuda matmul: no device decoder for " + std::string(type_name(type)));
  launch_check("matmul_tiled");
}

}  // namespace df::cuda
