#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/moe.cuh"

namespace df::cuda {
namespace {

constexpr int kRouteThreads = 256;

// One block per row; p in shared memory.
__global__ void route_kernel(const float* logits, int64_t stride, int64_t E, int64_t k, bool normalize, float scale,
                             int32_t* ids, float* w) {
  extern __shared__ float p[];
  __shared__ float red_f[kRouteThreads];
  __shared__ double red_d[kRouteThreads];
  __shared__ int red_i[kRouteThreads];
  const int64_t r = blockIdx.x;
  const float* x = logits + r * stride;
  const int t = threadIdx.x;
  float mx = -INFINITY;
  for (int64_t e = t; e < E; e += blockDim.x) mx = fmaxf(mx, x[e]);
  red_f[t] = mx;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) red_f[t] = fmaxf(red_f[t], red_f[t + s]);
    __syncthreads();
  }
  mx = red_f[0];
  double sum = 0.0;
  for (int64_t e = t; e < E; e += blockDim.x) {
    const float v = expf(x[e] - mx);
    p[e] = v;
    sum += static_cast<double>(v);
  }
  red_d[t] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) red_d[t] += red_d[t + s];
    __syncthreads();
  }
  const float inv = static_cast<float>(1.0 / red_d[0]);
  for (int64_t e = t; e < E; e += blockDim.x) p[e] = __fmul_rn(p[e], inv);
  __syncthreads();
  int32_t* id = ids + r * k;
  float* wr = w + r * k;
  for (int64_t j = 0; j < k; ++j) {
    // the largest p, the lowest index among equals
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int64_t e = t; e < E; e += blockDim.x)
      if (p[e] > best) best = p[e], bi = static_cast<int>(e);
    red_f[t] = best;
    red_i[t] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (t < s) {
        const float ov = red_f[t + s];
        const int oi = red_i[t + s];
        if (ov > red_f[t] || (ov == red_f[t] && oi < red_i[t])) red_f[t] = ov, red_i[t] = oi;
      }
      __syncthreads();
    }
    if (t == 0) {
      id[j] = red_i[0];
      wr[j] = red_f[0];
      p[red_i[0]] = -1.0f;
    }
    __syncthreads();
  }
  if (t == 0) {
    if (normalize) {
      double s = 0.0;
      for (int64_t j = 0; j < k; ++j) s += static_cast<double>(wr[j]);
      const float c = fmaxf(static_cast<float>(s), 6.103515625e-5f);
      for (int64_t j = 0; j < k; ++j) wr[j] = __fdiv_rn(wr[j], c);
    }
    if (scale != 0.0f && scale != 1.0f)
      for (int64_t j = 0; j < k; ++j) wr[j] = __fmul_rn(wr[j], scale);
  }
}

__global__ void scatter_kernel(const float* src, int64_t ss, int64_t cols, const int32_t* rows, float* dst,
                               int64_t ds) {
  const float* s = src + static_cast<int64_t>(blockIdx.x) * ss;
  float* d = dst + static_cast<int64_t>(rows[blockIdx.x]) * ds;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

__global__ void combine_kernel(const float* ex, int64_t es, const float* w, int64_t ws, int64_t k, const float* sh,
                               int64_t shs, const float* g, int64_t gs, float* out, int64_t os, int64_t d) {
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  const float* wr = w + r * ws;
  float o = __fmul_rn(ex[(r * k) * es + i], wr[0]);
  for (int64_t j = 1; j < k; ++j) o = __fadd_rn(o, __fmul_rn(ex[(r * k + j) * es + i], wr[j]));
  if (sh) o = __fadd_rn(o, __fmul_rn(sh[r * shs + i], g[r * gs]));
  out[r * os + i] = o;
}

}  // namespace

void launch_moe_route(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                      float scale, int32_t* ids, float* w, cudaStream_t s) {
  if (n == 0) return;
  route_kernel<<<static_cast<unsigned>(n), kRouteThreads, static_cast<size_t>(E) * sizeof(float), s>>>(
      logits, stride, E, k, normalize, scale, ids, w);
  launch_check("moe_route");
}

void launch_scatter_rows_f32(const float* src, int64_t src_stride, int64_t n, int64_t cols, const int32_t* rows,
                             float* dst, int64_t dst_stride, cudaStream_t s) {
  if (n == 0) return;
  scatter_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(src, src_stride, cols, rows, dst, dst_stride);
  launch_check("scatter_rows");
}

void launch_moe_combine(const float* experts, int64_t e_stride, const float* w, int64_t w_stride, int64_t k,
                        const float* shared, int64_t sh_stride, const float* gate, int64_t gate_stride, float* out,
                        int64_t out_stride, int64_t n, int64_t d, cudaStream_t s) {
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>((d + 255) / 256), static_cast<unsigned>(n));
  combine_kernel<<<grid, 256, 0, s>>>(experts, e_stride, w, w_stride, k, shared, sh_stride, gate, gate_stride, out,
                                      out_stride, d);
  launch_check("moe_combine");
}

}  // namespace df::cuda
