// x rounded to int8 blocks in shared memory, for the dp4a matvec formats (dev_dp4a.cuh).
// Per x row j, xq_row_bytes(cols) bytes at j * xq_row_bytes:
//   quant plane: cols int8, in the part-planar order of the format (part size P elements,
//     16-element word w of part t at (w * nparts + t) * 16, so the 32 lanes of a warp reading
//     word w of their parts t = l, l + 32, ... read 512 contiguous bytes: no bank conflicts);
//   meta plane at byte cols: per 32-element block b, 8 bytes {float d, int16 s0, int16 s1}:
//     the scale (x ~ d q) and the sums of q over elements 0..15 and 16..31 of the block.
// x is rounded as the CPU engine rounds the activations of the weight's dot (src/quant
// formats_q8.h), so that the GPU's products are the CPU's up to the order of float sums:
//   Q8_0 (activations of Q8_0, Q4_0): per 32, d = fp16(amax / 127), q = rne(x * 127 / amax);
//   Q8_K (the K-quants, IQ4_XS): per 256, max = the element of largest magnitude (first on
//     ties), iscale = -127 / max, q = min(127, rne(iscale * x)), d = 1 / iscale (every
//     32-block of the 256 holds the same d).
// Zero blocks: d = 0, q = 0. A row's bytes depend on that row alone, never on n.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace df::cudamv {

__host__ __device__ constexpr int64_t xq_row_bytes(int64_t cols) { return (cols + cols / 4 + 15) & ~int64_t{15}; }

// The int8 x of one lane's part: q at word 0 of the part (row 0), m at the meta of its first
// 32-block (row 0); rb: bytes per x row; plane: bytes between the part's words (nparts * 16).
struct XQ {
  const uint8_t* q;
  const uint8_t* m;
  int rb, plane;
  __host__ __device__ int4 word(int j, int w) const { return *reinterpret_cast<const int4*>(q + j * rb + w * plane); }
  __host__ __device__ int2 meta(int j, int k) const { return *reinterpret_cast<const int2*>(m + j * rb + 8 * k); }
};
__host__ __device__ __forceinline__ float xq_d(int2 m) {
#ifdef __CUDA_ARCH__
  return __int_as_float(m.x);
#else
  float f;
  std::memcpy(&f, &m.x, 4);
  return f;
#endif
}
__host__ __device__ __forceinline__ int xq_s0(int2 m) { return (m.y << 16) >> 16; }  // sum of q, elements 0..15
__host__ __device__ __forceinline__ int xq_s1(int2 m) { return m.y >> 16; }          // elements 16..31
__host__ __device__ __forceinline__ int xq_s(int2 m) { return xq_s0(m) + xq_s1(m); }  // the block's 32

// Where quantize_x's bytes go: the block's own shared memory (off: a byte offset into xq).
struct XqLocal {
  uint8_t* xq;
  __device__ void operator()(int off, uint32_t a, uint32_t b) const {
    *reinterpret_cast<uint2*>(xq + off) = make_uint2(a, b);
  }
};

// x's 8-element units (threads' shares) of quantize_x that block `rank` of `count` rounds:
// [i0, i1), whole 256-element chunks (32 units: a warp's, so a 32-block and a Q8_K block
// never straddle two blocks' ranges).
__host__ __device__ inline void xq_range(int n, int cols, int rank, int count, int& i0, int& i1) {
  const int total8 = n * cols / 8, chunks = (total8 + 31) / 32;
  i0 = 32 * (chunks * rank / count);
  const int e = 32 * (chunks * (rank + 1) / count);
  i1 = e < total8 ? e : total8;
}

// Rounds x rows 0..n-1 (src(j, c): float4 of row j at element c, c % 4 == 0) into xq (the
// layout above, part size P; kQ8K: Q8_K rounding, else Q8_0). Every thread of the block
// calls it (shuffles: a thread takes 8 consecutive elements, 4 threads one 32-block, a warp
// one 256-block). cols % 32 == 0 (kQ8K: % 256 == 0); blockDim.x % 32 == 0.
// Units [i0, i1) only (xq_range; i0 % 32 == 0), each 8-byte word written by store(off, a, b)
// at byte offset off of xq (XqLocal: this block's; mv_kernel's cluster store: every block of
// its cluster). A unit's bytes do not depend on the range: the same bytes however x is split.
template <int P, bool kQ8K, class Src, class Store>
__device__ void quantize_x_range(const Src& src, int n, int cols, int i0, int i1, const Store& store) {
  constexpr int K = 1;  // steps whose x loads are issued together (K = 4 cost Q8_0 / Q4_0 9-20 % on the H200)
  const int rb = static_cast<int>(xq_row_bytes(cols)), nparts = cols / P;
  const int total8 = i1;
  for (int base0 = i0; base0 < total8; base0 += K * static_cast<int>(blockDim.x)) {
  float4 xa[K], xb[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = base0 + k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    const int e = 8 * i, j = e / cols, c = e - j * cols;
    xa[k] = xb[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < total8) xa[k] = src(j, c), xb[k] = src(j, c + 4);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int i = base0 + k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
    const bool ok = i < total8;  // whole groups of 4 (total8 % 4 == 0, base % 4 == 0)
    const int e = 8 * (ok ? i : 0), j = e / cols, c = e - j * cols;
    const float v[8] = {xa[k].x, xa[k].y, xa[k].z, xa[k].w, xb[k].x, xb[k].y, xb[k].z, xb[k].w};
    float d, mul;  // x ~ d q, q = rne(x * mul)
    if constexpr (kQ8K) {
      float am = 0.0f, mx = 0.0f;  // the first element of largest magnitude of the 256
      int at = 0;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (fabsf(v[k]) > am) am = fabsf(v[k]), mx = v[k], at = k;
      at += 8 * static_cast<int>(threadIdx.x & 31);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float am2 = __shfl_xor_sync(0xffffffffu, am, o), mx2 = __shfl_xor_sync(0xffffffffu, mx, o);
        const int at2 = __shfl_xor_sync(0xffffffffu, at, o);
        if (am2 > am || (am2 == am && at2 < at)) am = am2, mx = mx2, at = at2;
      }
      mul = am > 0.0f ? -127.0f / mx : 0.0f;
      d = am > 0.0f ? 1.0f / mul : 0.0f;
    } else {
      float am = 0.0f;
#pragma unroll
      for (int k = 0; k < 8; ++k) am = fmaxf(am, fabsf(v[k]));
      am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
      am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
      d = __half2float(__float2half_rn(am / 127.0f));
      mul = am > 0.0f ? 127.0f / am : 0.0f;
    }
    int s = 0;
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int q = min(127, __float2int_rn(__fmul_rn(v[k], mul)));
      s += q;
      w[k / 4] |= (static_cast<uint32_t>(q) & 0xffu) << (8 * (k % 4));
    }
    const int s16 = s + __shfl_xor_sync(0xffffffffu, s, 1);    // elements 0..15 or 16..31
    const int s16b = __shfl_xor_sync(0xffffffffu, s16, 2);     // the other half
    if (ok) {
      const int row = j * rb;
      store(row + ((c % P) / 16 * nparts + c / P) * 16 + c % 16, w[0], w[1]);
      if ((i & 3) == 0)
        store(row + cols + (c / 32) * 8, __float_as_uint(d),
              (static_cast<uint32_t>(s16) & 0xffffu) | (static_cast<uint32_t>(s16b) << 16));
    }
  }
  }
}

// All of x rows 0..n-1 into this block's xq.
template <int P, bool kQ8K, class Src>
__device__ void quantize_x(const Src& src, int n, int cols, uint8_t* xq) {
  quantize_x_range<P, kQ8K>(src, n, cols, 0, n * cols / 8, XqLocal{xq});
}

}  // namespace df::cudamv
