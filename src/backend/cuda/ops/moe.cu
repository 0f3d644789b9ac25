#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/launch.cuh"
#include "backend/cuda/ops/moe.cuh"

namespace df::cuda {
namespace {

__global__ void scatter_kernel(const float* src, int64_t ss, int64_t cols, const int32_t* rows, float* dst,
                               int64_t ds) {
  const float* s = src + static_cast<int64_t>(blockIdx.x) * ss;
  float* d = dst + static_cast<int64_t>(rows[blockIdx.x]) * ds;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

template <bool kAdd>
__global__ void combine_kernel(const float* ex, int64_t es, const float* w, int64_t ws, int64_t k, const float* sh,
                               int64_t shs, const float* g, int64_t gs, float* out, int64_t os, int64_t d) {
  pdl_wait();  // every input is an earlier kernel's output (no-ops without the PDL attribute)
  pdl_trigger();
  const int64_t r = blockIdx.y;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  const float* wr = w + r * ws;
  float o = __fmul_rn(ex[(r * k) * es + i], wr[0]);
  for (int64_t j = 1; j < k; ++j) o = __fadd_rn(o, __fmul_rn(ex[(r * k + j) * es + i], wr[j]));
  if (sh) o = __fadd_rn(o, __fmul_rn(sh[r * shs + i], g[r * gs]));
  if constexpr (kAdd) out[r * os + i] = __fadd_rn(out[r * os + i], o);
  else out[r * os + i] = o;
}

constexpr int kGroupWarps = 8;

// Warp w of block b counts the slots of expert e = b * kGroupWarps + w (ballots over ids).
__global__ void group_count_kernel(const int32_t* ids, int64_t n_slots, int64_t E, int32_t* counts) {
  const int lane = threadIdx.x & 31;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kGroupWarps + (threadIdx.x >> 5);
  if (e >= E) return;
  int c = 0;
  for (int64_t b = 0; b < n_slots; b += 32) {
    const int64_t i = b + lane;
    c += __popc(__ballot_sync(0xffffffffu, i < n_slots && ids[i] == e));
  }
  if (lane == 0) counts[e] = c;
}

// Warp w places expert e's slots in slot order after the chunks of experts 0 .. e - 1.
__global__ void group_place_kernel(const int32_t* ids, int64_t n_slots, int64_t E, int64_t x_div,
                                   const int32_t* counts, int32_t* chunk_e, int32_t* slot_of, int32_t* x_of,
                                   int32_t* pos_of) {
  const int lane = threadIdx.x & 31;
  const int64_t e = static_cast<int64_t>(blockIdx.x) * kGroupWarps + (threadIdx.x >> 5);
  if (e >= E) return;
  int64_t c0 = 0;
  for (int64_t j = lane; j < e; j += 32) c0 += (counts[j] + 7) / 8;
  for (int o = 16; o > 0; o >>= 1) c0 += __shfl_xor_sync(0xffffffffu, c0, o);
  const int cnt = counts[e], nch = (cnt + 7) / 8;
  const int64_t p0 = 8 * c0;
  int placed = 0;
  for (int64_t b = 0; b < n_slots; b += 32) {
    const int64_t i = b + lane;
    const bool mine = i < n_slots && ids[i] == e;
    const unsigned m = __ballot_sync(0xffffffffu, mine);
    if (mine) {
      const int64_t p = p0 + placed + __popc(m & ((1u << lane) - 1u));
      slot_of[p] = static_cast<int32_t>(i);
      x_of[p] = static_cast<int32_t>(i / x_div);
      pos_of[i] = static_cast<int32_t>(p);
    }
    placed += __popc(m);
  }
  for (int r = cnt + lane; r < 8 * nch; r += 32) slot_of[p0 + r] = -1, x_of[p0 + r] = -1;
  for (int j = lane; j < nch; j += 32) chunk_e[c0 + j] = static_cast<int32_t>(e);
}

// Block p: dst[p] = src[rows[p]] for the padded rows of used chunks with a row (rows[p] >= 0);
// the other rows are left as they are (their products are never read).
__global__ void gather_padded_kernel(const float* src, int64_t ss, int64_t cols, const int32_t* rows,
                                     const int32_t* chunk_e, float* dst) {
  const int64_t p = blockIdx.x;
  if (chunk_e[p / 8] < 0) return;
  const int32_t r = rows[p];
  if (r < 0) return;
  const float4* s4 = reinterpret_cast<const float4*>(src + r * ss);
  float4* d4 = reinterpret_cast<float4*>(dst + p * cols);
  for (int64_t c = threadIdx.x; c < cols / 4; c += blockDim.x) d4[c] = s4[c];
}

}  // namespace

void launch_moe_gather_padded(const float* src, int64_t src_stride, int64_t cols, const int32_t* rows,
                              const int32_t* chunk_e, int64_t max_chunks, float* dst, cudaStream_t s) {
  if (max_chunks == 0) return;
  gather_padded_kernel<<<static_cast<unsigned>(8 * max_chunks), 128, 0, s>>>(src, src_stride, cols, rows, chunk_e,
                                                                             dst);
  launch_check("moe_gather_padded");
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
  combine_kernel<false><<<grid, 256, 0, s>>>(experts, e_stride, w, w_stride, k, shared, sh_stride, gate, gate_stride,
                                             out, out_stride, d);
  launch_check("moe_combine");
}

void launch_moe_combine_add(const float* experts, int64_t e_stride, const float* w, int64_t w_stride, int64_t k,
                            const float* shared, int64_t sh_stride, const float* gate, int64_t gate_stride, float* x,
                            int64_t x_stride, int64_t n, int64_t d, cudaStream_t s, bool pdl) {
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>((d + 255) / 256), static_cast<unsigned>(n));
  launch_kernel(combine_kernel<true>, grid, dim3(256), 0, s, pdl, experts, e_stride, w, w_stride, k, shared, sh_stride,
                gate, gate_stride, x, x_stride, d);
  launch_check("moe_combine_add");
}

int64_t moe_max_chunks(int64_t n_slots, int64_t E) {
  // sum_e ceil(c_e / 8) <= n_slots / 8 + (the used experts) * 7 / 8 + 1
  return n_slots / 8 + std::min(n_slots, E) + 1;
}

void launch_moe_group(const int32_t* ids, int64_t n_slots, int64_t E, int64_t max_chunks, int64_t x_div,
                      int32_t* counts, int32_t* chunk_e, int32_t* slot_of, int32_t* x_of, int32_t* pos_of,
                      cudaStream_t s) {
  if (n_slots == 0) return;
  cuda_check(cudaMemsetAsync(chunk_e, 0xff, static_cast<size_t>(max_chunks) * sizeof(int32_t), s), "moe_group");
  cuda_check(cudaMemsetAsync(pos_of, 0xff, static_cast<size_t>(n_slots) * sizeof(int32_t), s), "moe_group");
  const unsigned blocks = static_cast<unsigned>((E + kGroupWarps - 1) / kGroupWarps);
  group_count_kernel<<<blocks, 32 * kGroupWarps, 0, s>>>(ids, n_slots, E, counts);
  launch_check("moe_group_count");
  group_place_kernel<<<blocks, 32 * kGroupWarps, 0, s>>>(ids, n_slots, E, x_div, counts, chunk_e, slot_of, x_of,
                                                         pos_of);
  launch_check("moe_group_place");
}

}  // namespace df::cuda
