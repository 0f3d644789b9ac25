// Kernels of the mixture-of-experts FFN (backend.h moe_route / matmul_id / moe_combine): the
// router (softmax, top-k, renormalisation, as the CPU op computes them), the scatter of an
// expert's product rows back to their slots, and the weighted sum of the experts.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

// Per row r of logits [n, E] (row stride in floats): p = softmax (exp(x - max), the sum in
// double, times (float)(1 / sum)); ids[r][j] = the k experts of largest p in decreasing order
// (lowest index among equal p); w[r][j] = p[ids[r][j]], divided by max(sum, 2^-14) when
// `normalize`, times `scale` unless 0 or 1. ids, w: dense [n, k]. E <= kMoeMaxExperts.
constexpr int kMoeMaxExperts = 4096;
void launch_moe_route(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                      float scale, int32_t* ids, float* w, cudaStream_t s);

// dst[rows[i]] = src[i] for i < n (rows of `cols` floats; strides in floats).
void launch_scatter_rows_f32(const float* src, int64_t src_stride, int64_t n, int64_t cols, const int32_t* rows,
                             float* dst, int64_t dst_stride, cudaStream_t s);

// out[r] = sum_j w[r][j] * experts[r * k + j] (in slot order, each product rounded before its
// add) [+ shared[r] * gate[r]]; shared null: no shared expert. Strides in floats.
void launch_moe_combine(const float* experts, int64_t e_stride, const float* w, int64_t w_stride, int64_t k,
                        const float* shared, int64_t sh_stride, const float* gate, int64_t gate_stride, float* out,
                        int64_t out_stride, int64_t n, int64_t d, cudaStream_t s);

}  // namespace df::cuda
