#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/matmul.cuh"

namespace df::cuda {
namespace {

constexpr int kTile = 64, kTileK = 32, kTileThreads = 256;

__global__ void __launch_bounds__(kTileThreads)
    matmul_tiled_kernel(const float* W, int64_t ws, int64_t m, int64_t k, const float* x, int64_t xs, int64_t n,
                        float* y, int64_t ys) {
  __shared__ float Wt[kTileK][kTile + 1];  // [k][m]
  __shared__ float Xt[kTileK][kTile + 1];  // [k][n]
  const int t = threadIdx.x;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kTile, n0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int tx = t % 16, ty = t / 16;
  const int lr = t / 4, lc = (t % 4) * 8;  // loader: row lr, columns lc .. lc + 7 of the step
  float acc[4][4] = {};
  for (int64_t c = 0; c < k; c += kTileK) {
    {
      const bool in = m0 + lr < m;
      const float4* wr = reinterpret_cast<const float4*>(W + (m0 + lr) * ws + c + lc);
      const float4 a = in ? wr[0] : make_float4(0, 0, 0, 0), b = in ? wr[1] : make_float4(0, 0, 0, 0);
      Wt[lc + 0][lr] = a.x, Wt[lc + 1][lr] = a.y, Wt[lc + 2][lr] = a.z, Wt[lc + 3][lr] = a.w;
      Wt[lc + 4][lr] = b.x, Wt[lc + 5][lr] = b.y, Wt[lc + 6][lr] = b.z, Wt[lc + 7][lr] = b.w;
    }
    {
      const bool in = n0 + lr < n;
      const float* xr = x + (n0 + lr) * xs + c + lc;
#pragma unroll
      for (int i = 0; i < 8; ++i) Xt[lc + i][lr] = in ? xr[i] : 0.0f;
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

void launch_matmul_f32_tiled(const float* W, int64_t w_stride, int64_t m, int64_t k, const float* x,
                             int64_t x_stride, int64_t n, float* y, int64_t y_stride, cudaStream_t s) {
  if (m == 0 || n == 0) return;
  if (k % kTileK != 0) throw Error("cuda matmul: row length must be a multiple of 32");
  const dim3 grid(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
  matmul_tiled_kernel<<<grid, kTileThreads, 0, s>>>(W, w_stride, m, k, x, x_stride, n, y, y_stride);
  launch_check("matmul_tiled");
}

}  // namespace df::cuda
