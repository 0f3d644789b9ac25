// Prefill GEMM on tensor cores: y[j, r] = sum_c W[r, c] * x[j, c] for many rows j of x
// (n > kMinRows), every weight format of matvec/ over its packed GPU layout.
//
// Each block computes a 128 (rows of x) x 128 (rows of W) tile of y. Per step of 64 columns,
// the x tile (f16, converted once per call by convert_x_f16) comes in by cp.async and the
// weight tile is dequantized by the block into shared memory as f16 (each thread loads the
// 16-byte words of its parts one step ahead, in registers, and dequantizes them after the
// step's products: the format's own dequantizer of matvec/, so no format needs its own
// kernel and no float copy of a weight exists outside shared memory). Products are
// mma.sync m16n8k16 f16 x f16 with f32 accumulation.
//
// Numerics: x and the weights are rounded to f16 (relative 2^-11 each), sums in f32: the
// result differs from the f32 path by ~1e-7 NMSE per product; rows are not bit-identical to
// matvec's (decode rows stay on matvec: n <= 8 never comes here).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

#include <cuda_runtime_api.h>

#include "backend/cuda/matvec/matvec.cuh"

namespace df::cuda::gemm {

constexpr int64_t kMinRows = 16;   // the backend uses the GEMM for n > kMinRows
constexpr int64_t kColsStep = 64;  // cols of a k step of the kernel: W.cols must be a multiple

// Whether the GEMM takes this weight (type known, cols a multiple of 64).
bool supported(const cudamv::PackedWeight& W);

// xh[j, c] = f16(x[j * x_stride + c]) (saturated to +-65504) for j < n, c < k; xh dense.
// x must be 16-byte aligned with x_stride % 4 == 0 and k % 4 == 0.
void convert_x_f16(const float* x, int64_t x_stride, int64_t n, int64_t k, uint16_t* xh, cudaStream_t s);

// y[j * y_stride + r] = sum_c W[r, c] * xh[j, c] for j < n, r < W.rows. xh: dense f16
// [n, W.cols] (16-byte aligned). Throws df::Error when !supported(W).
void gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s);

// Workbench: the same with a tile configuration other than the default (codes in
// gemm_kernel.cuh); false when the code is unknown.
bool gemm_variant(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride,
                  int code, cudaStream_t s);

// The block tile per problem, picked by timing: the first call of a (type, rows, cols, rows
// of x rounded up to 64) times every tile once (events on the stream, outside a graph
// capture) and keeps the fastest. The tile does not change the result: every tile sums a
// y element's products in the same order (64-column steps, the mma's fixed k16 order), so
// the pick changes the speed only. One per backend (no global state).
class Tuner {
 public:
  // y as gemm(); the first call of a shape runs the GEMM once per tile (the last run leaves y).
  void gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s,
            bool capturing);

 private:
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, int> best_;
};

}  // namespace df::cuda::gemm
