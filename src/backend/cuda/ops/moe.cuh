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
// Logits are finite. Both kernels give the same bits (moe_route.cu): `warp` (one warp per row;
// E <= 512 and k <= 32, other shapes run `block`) and `block` (a 256-thread block per row, the
// stop-20 kernel, the backend's default; CudaOptions::moe_warp_route picks `warp`). `pdl`: the
// warp kernel is launched with PDL
// (launch.cuh; the block kernel never is).
constexpr int kMoeMaxExperts = 4096;
enum class MoeRouteKernel { warp, block };
void launch_moe_route(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                      float scale, int32_t* ids, float* w, cudaStream_t s, MoeRouteKernel kernel, bool pdl);

// As launch_moe_route with one more slot per row (the shared expert as expert E of stacks
// extended by it): ids, w dense [n, k + 1]; ids[r][k] = E, w[r][k] = extra[r * extra_stride]
// (its sigmoid gate; not normalised with the routed weights).
void launch_moe_route_extra(const float* logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
                            float scale, const float* extra, int64_t extra_stride, int32_t* ids, float* w,
                            cudaStream_t s, MoeRouteKernel kernel, bool pdl);

// Routed slots grouped by expert on the device (prefill: matmul_id of more than 8 rows),
// for a launch of chunks of 8 rows that each run one expert (matvec.cuh MatvecFusion::ids
// with n = 8). ids [n_slots] (the routed ids, row-major [n, k]). Expert e's slots, in slot
// order, take padded rows 8 * c_e .. (c_e = the chunks of the experts before e, each expert
// ceil(count / 8) chunks): chunk_e[c] = the expert of chunk c (-1: unused, up to max_chunks),
// slot_of[p] = the slot of padded row p (-1: padding), x_of[p] = slot_of[p] / x_div (-1 for
// padding), pos_of[i] = the padded row of slot i (-1 for an id outside [0, E)).
// counts: [E] scratch. max_chunks >= moe_max_chunks(n_slots, E). Deterministic (no atomics).
int64_t moe_max_chunks(int64_t n_slots, int64_t E);
void launch_moe_group(const int32_t* ids, int64_t n_slots, int64_t E, int64_t max_chunks, int64_t x_div,
                      int32_t* counts, int32_t* chunk_e, int32_t* slot_of, int32_t* x_of, int32_t* pos_of,
                      cudaStream_t s);

// dst row p (dense, `cols` floats, cols % 4 == 0, 16-byte aligned rows) = src row rows[p], for
// the 8 * max_chunks padded rows of launch_moe_group whose chunk is used and whose rows[p] >= 0
// (rows: its slot_of or x_of); the others are not written.
void launch_moe_gather_padded(const float* src, int64_t src_stride, int64_t cols, const int32_t* rows,
                              const int32_t* chunk_e, int64_t max_chunks, float* dst, cudaStream_t s);

// dst[rows[i]] = src[i] for i < n (rows of `cols` floats; strides in floats).
void launch_scatter_rows_f32(const float* src, int64_t src_stride, int64_t n, int64_t cols, const int32_t* rows,
                             float* dst, int64_t dst_stride, cudaStream_t s);

// out[r] = sum_j w[r][j] * experts[r * k + j] (in slot order, each product rounded before its
// add) [+ shared[r] * gate[r]]; shared null: no shared expert. Strides in floats.
// As launch_moe_combine, then x[r] += out[r] (the residual add, the bits of add()) instead of
// storing out. pdl: launched with programmatic dependent launch (the kernel waits first).
void launch_moe_combine_add(const float* experts, int64_t e_stride, const float* w, int64_t w_stride, int64_t k,
                            const float* shared, int64_t sh_stride, const float* gate, int64_t gate_stride, float* x,
                            int64_t x_stride, int64_t n, int64_t d, cudaStream_t s, bool pdl = false);

void launch_moe_combine(const float* experts, int64_t e_stride, const float* w, int64_t w_stride, int64_t k,
                        const float* shared, int64_t sh_stride, const float* gate, int64_t gate_stride, float* out,
                        int64_t out_stride, int64_t n, int64_t d, cudaStream_t s);

}  // namespace df::cuda
