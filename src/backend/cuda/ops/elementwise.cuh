// Elementwise ops over [rows, cols] f32 matrices (row strides in floats; outputs may alias
// inputs): the MLP gate, residual add, activations and the DeltaNet gates. pdl: launched with
// programmatic dependent launch (ops/launch.cuh).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

// A strided f32 matrix view.
struct Mat {
  float* p = nullptr;
  int64_t stride = 0;  // floats between rows
};
struct CMat {
  const float* p = nullptr;
  int64_t stride = 0;
};

enum class Unary { SILU, SIGMOID, SOFTPLUS };

// out = silu(gate) * up
void launch_swiglu(CMat gate, CMat up, Mat out, int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);
// x += y
void launch_add(Mat x, CMat y, int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);
// y = f(x)
void launch_unary(Unary op, CMat x, Mat y, int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);
// out = sigmoid(gate) * x
void launch_sigmoid_mul(CMat gate, CMat x, Mat out, int64_t rows, int64_t cols, cudaStream_t s, bool pdl = false);
// out[r][c] = softplus(x[r][c] + bias[c]) * scale[c]
void launch_softplus_scale(CMat x, const float* bias, const float* scale, Mat out, int64_t rows, int64_t cols,
                           cudaStream_t s, bool pdl = false);

}  // namespace df::cuda
