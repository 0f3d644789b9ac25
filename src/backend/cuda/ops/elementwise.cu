#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/activations.cuh"
#include "backend/cuda/ops/elementwise.cuh"
#include "backend/cuda/ops/launch.cuh"

namespace df::cuda {
namespace {

__device__ __forceinline__ float sigmoid(float x) { return act_sigmoid(x); }
__device__ __forceinline__ float silu(float x) { return act_silu(x); }
__device__ __forceinline__ float softplus(float x) { return act_softplus(x); }

// f(r, c) over every element; a grid-stride loop over rows * cols.
template <class F>
__global__ void each_kernel(int64_t rows, int64_t cols, F f) {
  pdl_wait();
  pdl_trigger();
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    f(i / cols, i % cols);
}

template <class F>
void each(int64_t rows, int64_t cols, cudaStream_t s, const char* name, F f, bool pdl) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  launch_kernel(each_kernel<F>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, s, pdl, rows, cols, f);
  launch_check(name);
}

}  // namespace

void launch_swiglu(CMat g, CMat u, Mat o, int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  each(rows, cols, s, "swiglu", [=] __device__(int64_t r, int64_t c) {
    o.p[r * o.stride + c] = act_swiglu(g.p[r * g.stride + c], u.p[r * u.stride + c]);
  }, pdl);
}

void launch_add(Mat x, CMat y, int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  each(rows, cols, s, "add", [=] __device__(int64_t r, int64_t c) { x.p[r * x.stride + c] += y.p[r * y.stride + c]; }, pdl);
}

void launch_unary(Unary op, CMat x, Mat y, int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  switch (op) {
    case Unary::SILU:
      each(rows, cols, s, "silu", [=] __device__(int64_t r, int64_t c) { y.p[r * y.stride + c] = silu(x.p[r * x.stride + c]); }, pdl);
      break;
    case Unary::SIGMOID:
      each(rows, cols, s, "sigmoid",
           [=] __device__(int64_t r, int64_t c) { y.p[r * y.stride + c] = sigmoid(x.p[r * x.stride + c]); }, pdl);
      break;
    case Unary::SOFTPLUS:
      each(rows, cols, s, "softplus",
           [=] __device__(int64_t r, int64_t c) { y.p[r * y.stride + c] = softplus(x.p[r * x.stride + c]); }, pdl);
      break;
  }
}

void launch_sigmoid_mul(CMat g, CMat x, Mat o, int64_t rows, int64_t cols, cudaStream_t s, bool pdl) {
  each(rows, cols, s, "sigmoid_mul", [=] __device__(int64_t r, int64_t c) {
    o.p[r * o.stride + c] = x.p[r * x.stride + c] * sigmoid(g.p[r * g.stride + c]);
  }, pdl);
}

void launch_softplus_scale(CMat x, const float* bias, const float* scale, Mat o, int64_t rows, int64_t cols,
                           cudaStream_t s, bool pdl) {
  each(rows, cols, s, "softplus_scale", [=] __device__(int64_t r, int64_t c) {
    o.p[r * o.stride + c] = softplus(x.p[r * x.stride + c] + bias[c]) * scale[c];
  }, pdl);
}

}  // namespace df::cuda
