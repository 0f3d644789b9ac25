// The MoE router (moe.cuh launch_moe_route*): softmax, top-k, renormalisation. Two kernels
// with the same bits: a 256-thread block per row (MoeRouteKernel::block, the stop-19/20
// kernel) and one warp per row with the row in registers (MoeRouteKernel::warp, E <= 512,
// k <= 32; other shapes take the block kernel).
#include <climits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/moe.cuh"

namespace df::cuda {
namespace {

constexpr int kRouteThreads = 256;
constexpr int kWarpRowsPerBlock = 4;
constexpr int kWarpMaxE = 512;
constexpr int kWarpMaxK = 32;
constexpr unsigned kFull = 0xffffffffu;

// One block per row; p in shared memory.
// ld: the row stride of ids and w (k, or k + 1 with the extra slot: id E, weight extra[r]).
__global__ void route_kernel(const float* logits, int64_t stride, int64_t E, int64_t k, bool normalize, float scale,
                             int32_t* ids, float* w, int64_t ld, const float* extra, int64_t extra_stride) {
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
  int32_t* id = ids + r * ld;
  float* wr = w + r * ld;
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
    if (extra) id[k] = static_cast<int32_t>(E), wr[k] = extra[r * extra_stride];
  }
}

__device__ __forceinline__ int warp_max(int v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_max_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}

__device__ __forceinline__ int warp_min(int v) {
#if __CUDA_ARCH__ >= 800
  return __reduce_min_sync(kFull, v);
#else
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(kFull, v, o));
  return v;
#endif
}

// One warp per row (blockDim.x / 32 rows a block), E <= 32 * NPER, k <= 32; the bits of
// route_kernel. Lane l holds expert e = l + 32 i in slot i (i < NPER). The max is exact in any
// order. The sum in double follows route_kernel's order: its thread t = l + 32 j (j < 8) adds
// e = t + 256 m in order of m, which is slot i = j + 8 m of lane l; its tree over the 256
// threads adds j + 4, then j + 2, then j + 1 within the lane, then lanes l + 16 .. l + 1
// (shuffles down). p is kept as its bits, an int ordered as the floats for p >= 0; a chosen
// expert becomes -1.0f (route_kernel's mark, below every p), a slot past E INT_MIN (below it).
// Each round takes the largest key of the warp, then the lowest index holding it.
template <int NPER>
__global__ void route_warp_kernel(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                                  float scale, int32_t* ids, float* w, int64_t ld, const float* extra,
                                  int64_t extra_stride) {
  pdl_wait();
  pdl_trigger();
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= n) return;  // the whole warp
  const float* x = logits + r * stride;
  float v[NPER];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < NPER; ++i) {
    const int e = lane + 32 * i;
    v[i] = e < E ? x[e] : -INFINITY;
    mx = fmaxf(mx, v[i]);
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
  double part[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) part[j] = 0.0;
#pragma unroll
  for (int i = 0; i < NPER; ++i) {
    if (lane + 32 * i < E) {
      v[i] = expf(v[i] - mx);
      part[i % 8] += static_cast<double>(v[i]);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) part[j] += part[j + 4];
  part[0] += part[2];
  part[1] += part[3];
  part[0] += part[1];
  double sum = part[0];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(kFull, sum, o);
  sum = __shfl_sync(kFull, sum, 0);
  const float inv = static_cast<float>(1.0 / sum);
  constexpr int kChosen = static_cast<int>(0xbf800000u);  // the bits of -1.0f
  int key[NPER];
#pragma unroll
  for (int i = 0; i < NPER; ++i) key[i] = lane + 32 * i < E ? __float_as_int(__fmul_rn(v[i], inv)) : INT_MIN;
  float my_w = 0.0f;
  int my_id = 0;
  double s = 0.0;  // the chosen p in order, route_kernel's renormalising sum
  for (int64_t j = 0; j < k; ++j) {
    int best = INT_MIN, bi = INT_MAX;
#pragma unroll
    for (int i = 0; i < NPER; ++i)
      if (key[i] > best) best = key[i], bi = lane + 32 * i;
    const int top = warp_max(best);
    const int win = warp_min(best == top ? bi : INT_MAX);
#pragma unroll
    for (int i = 0; i < NPER; ++i)
      if (lane + 32 * i == win) key[i] = kChosen;
    const float pj = __int_as_float(top);
    if (lane == j) my_w = pj, my_id = win;
    s += static_cast<double>(pj);
  }
  int32_t* id = ids + r * ld;
  float* wr = w + r * ld;
  if (lane < k) {
    if (normalize) my_w = __fdiv_rn(my_w, fmaxf(static_cast<float>(s), 6.103515625e-5f));
    if (scale != 0.0f && scale != 1.0f) my_w = __fmul_rn(my_w, scale);
    id[lane] = my_id;
    wr[lane] = my_w;
  }
  if (extra && lane == 0) id[k] = static_cast<int32_t>(E), wr[k] = extra[r * extra_stride];
}

template <int NPER>
void launch_warp(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize, float scale,
                 int32_t* ids, float* w, int64_t ld, const float* extra, int64_t extra_stride, cudaStream_t s,
                 bool pdl) {
  const int64_t rows = n < kWarpRowsPerBlock ? n : kWarpRowsPerBlock;
  const dim3 grid(static_cast<unsigned>((n + rows - 1) / rows));
  launch_kernel(route_warp_kernel<NPER>, grid, dim3(static_cast<unsigned>(32 * rows)), 0, s, pdl, logits, stride, n,
                E, k, normalize, scale, ids, w, ld, extra, extra_stride);
}

void launch_route(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize, float scale,
                  int32_t* ids, float* w, int64_t ld, const float* extra, int64_t extra_stride, cudaStream_t s,
                  MoeRouteKernel kernel, bool pdl) {
  if (n == 0) return;
  if (kernel == MoeRouteKernel::warp && E <= kWarpMaxE && k <= kWarpMaxK) {
    auto* f = E <= 32 ? &launch_warp<1> : E <= 64 ? &launch_warp<2> : E <= 128 ? &launch_warp<4>
            : E <= 256 ? &launch_warp<8> : &launch_warp<16>;
    f(logits, stride, n, E, k, normalize, scale, ids, w, ld, extra, extra_stride, s, pdl);
    return;
  }
  route_kernel<<<static_cast<unsigned>(n), kRouteThreads, static_cast<size_t>(E) * sizeof(float), s>>>(
      logits, stride, E, k, normalize, scale, ids, w, ld, extra, extra_stride);
}

}  // namespace

void launch_moe_route(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                      float scale, int32_t* ids, float* w, cudaStream_t s, MoeRouteKernel kernel, bool pdl) {
  launch_route(logits, stride, n, E, k, normalize, scale, ids, w, k, nullptr, 0, s, kernel, pdl);
  launch_check("moe_route");
}

void launch_moe_route_extra(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                            float scale, const float* extra, int64_t extra_stride, int32_t* ids, float* w,
                            cudaStream_t s, MoeRouteKernel kernel, bool pdl) {
  launch_route(logits, stride, n, E, k, normalize, scale, ids, w, k + 1, extra, extra_stride, s, kernel, pdl);
  launch_check("moe_route_extra");
}

}  // namespace df::cuda
