// Fast matvec formats over the planar layout (layout.cuh): per row, L sub-planes of
// nparts x 16 bytes (uint4 word i of part t at q_row + (i * nparts + t) * 16, so one warp
// load reads 512 contiguous bytes), then the block meta (scales). Each struct:
//   kPartElems, kLoads, kPartsPerBlock; Meta, load_meta(m_row, t, nblocks);
//   dot<N>(q, meta, xa, acc): acc[j] += sum over the part of w * x[j] (xa(j, i): the float4 of
//     x row j at part element i), with the
//   block scale factored out of the part's sums (sum q x, then times d). The same
//   operations for every N, so rows stay bit-identical whatever n is.
// Integers become floats in one of two ways (template kHalf, the workbench times both;
// the defaults at the end of this file use F32):
//   F32 (kHalf = false): the byte placed in the mantissa of 2^23 (one PRMT) minus 2^23 + bias
//     (one FADD): exact integers, 1 integer-pipe + 2 FP instructions per element;
//   H16 (kHalf = true): two bytes (or nibbles) put into the mantissas of a half2 1.0 (one
//     PRMT or LOP3 per two elements), widened to f32 (FP pipe), multiplied: v = 1 + q / 2^k;
//     the sum of (q - bias) x is then 2^k (s - S) - bias S with S the 16-element sums of x
//     from the staging. Half the integer-pipe work (Hopper's INT32 rate is half its FP32
//     rate), but the widening is not free: measured slower. Products are rounded relative
//     to |x|, so the error grows by about 2^k / rms(q): NMSE ~1e-12 (measured).
#pragma once
#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cudamv {

// Byte k of w as a float minus bias (bias folded into the constant, exact).
template <int kBias>
__device__ __forceinline__ float ubyte_f(uint32_t w, int k) {
  return __int_as_float(static_cast<int>(__byte_perm(w, 0x4B000000u, 0x7540u | k))) - (8388608.0f + kBias);
}


// sum_k f(w, k) * x4[k] for the 4 bytes of w, into s (fixed order k = 0..3).
template <int kBias>
__device__ __forceinline__ float dot4(uint32_t w, float4 xv, float s) {
  s = fmaf(ubyte_f<kBias>(w, 0), xv.x, s);
  s = fmaf(ubyte_f<kBias>(w, 1), xv.y, s);
  s = fmaf(ubyte_f<kBias>(w, 2), xv.z, s);
  s = fmaf(ubyte_f<kBias>(w, 3), xv.w, s);
  return s;
}

__device__ __forceinline__ float2 half2_bits(uint32_t h) {
  __half2_raw r;
  r.x = static_cast<unsigned short>(h & 0xffffu);
  r.y = static_cast<unsigned short>(h >> 16);
  return __half22float2(__half2(r));
}

// 4 byte lanes of w times x, into s: F32: sum (b - bias) x; H16: sum (1 + b / 1024) x.
template <bool kHalf, int kBias>
__device__ __forceinline__ float dot4b(uint32_t w, float4 xv, float s) {
  if constexpr (!kHalf) {
    return dot4<kBias>(w, xv, s);
  } else {
    const float2 a = half2_bits(__byte_perm(w, 0x3c3cu, 0x4140u)), b = half2_bits(__byte_perm(w, 0x3c3cu, 0x4342u));
    s = fmaf(a.x, xv.x, s);
    s = fmaf(a.y, xv.y, s);
    s = fmaf(b.x, xv.z, s);
    s = fmaf(b.y, xv.w, s);
    return s;
  }
}

// sum (b - bias) x of a group from dot4b's s and the group's x sum S.
template <bool kHalf, int kBias, int kScale = 1024>
__device__ __forceinline__ float fix_sum(float s, float S) {
  if constexpr (!kHalf) return s;
  else return fmaf(static_cast<float>(kScale), s - S, -static_cast<float>(kBias) * S);
}

// Byte i (compile-time) of a 16-byte word.
__device__ __forceinline__ int byte_at(const uint4& q, int i) {
  const uint32_t w = i < 4 ? q.x : i < 8 ? q.y : i < 12 ? q.z : q.w;
  return static_cast<int>((w >> (8 * (i % 4))) & 0xff);
}

// ---- float formats: raw rows are already planar with one 16-byte load per part ----
// Per format: kSums (dot uses xa.sum16), kGlobalX (x read straight from global memory is
// faster than the shared-memory copy: the float formats, whose x reads per weight byte are few).
struct FastF32 {
  using Other = FastF32;
  static constexpr GgmlType kType = GgmlType::F32;
  static constexpr bool kSums = false, kGlobalX = true;
  static constexpr int kPartElems = 4, kLoads = 1, kPartsPerBlock = 1;
  struct Meta {};
  __device__ static Meta load_meta(const uint8_t*, int, int) { return {}; }
  __device__ static void dequant(const uint4 (&q)[1], Meta, float (&w)[4]) {
    w[0] = __uint_as_float(q[0].x), w[1] = __uint_as_float(q[0].y), w[2] = __uint_as_float(q[0].z), w[3] = __uint_as_float(q[0].w);
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta, const X& xa, float (&acc)[N]) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float4 xv = xa(j, 0);
      acc[j] = fmaf(__uint_as_float(q[0].x), xv.x, acc[j]);
      acc[j] = fmaf(__uint_as_float(q[0].y), xv.y, acc[j]);
      acc[j] = fmaf(__uint_as_float(q[0].z), xv.z, acc[j]);
      acc[j] = fmaf(__uint_as_float(q[0].w), xv.w, acc[j]);
    }
  }
};

template <bool kBf16>
struct FastHalf {
  using Other = FastHalf;
  static constexpr GgmlType kType = kBf16 ? GgmlType::BF16 : GgmlType::F16;
  static constexpr bool kSums = false, kGlobalX = true;
  static constexpr int kPartElems = 8, kLoads = 1, kPartsPerBlock = 1;
  struct Meta {};
  __device__ static Meta load_meta(const uint8_t*, int, int) { return {}; }
  __device__ static float lo(uint32_t u) { return kBf16 ? __uint_as_float(u << 16) : h2f(static_cast<uint16_t>(u)); }
  __device__ static float hi(uint32_t u) { return kBf16 ? __uint_as_float(u & 0xffff0000u) : h2f(static_cast<uint16_t>(u >> 16)); }
  __device__ static void dequant(const uint4 (&q)[1], Meta, float (&w)[8]) {
    const uint32_t u[4] = {q[0].x, q[0].y, q[0].z, q[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) w[2 * i] = lo(u[i]), w[2 * i + 1] = hi(u[i]);
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta, const X& xa, float (&acc)[N]) {
    const uint32_t u[4] = {q[0].x, q[0].y, q[0].z, q[0].w};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float4 a = xa(j, 0), b = xa(j, 4);
      const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc[j] = fmaf(lo(u[i]), xs[2 * i], acc[j]);
        acc[j] = fmaf(hi(u[i]), xs[2 * i + 1], acc[j]);
      }
    }
  }
};
using FastF16 = FastHalf<false>;
using FastBF16 = FastHalf<true>;

// sum (q - kBias) x over the 32 nibbles of a Q4_0-ordered word (byte i: element i low,
// element i + 16 high); sum_x = sum of the 32 x (from the staging sums).
template <bool kHalf, int kBias, class X>
__device__ __forceinline__ float dot_q4_32(const uint4& q, const X& xa, int j, float& sum_x) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  const float S_lo = xa.sum16(j, 0), S_hi = xa.sum16(j, 16);
  sum_x = S_lo + S_hi;
  float s_lo = 0.0f, s_hi = 0.0f;
  if constexpr (!kHalf) {
#pragma unroll
    for (int m = 0; m < 4; ++m) s_lo = dot4<kBias>(w[m] & 0x0f0f0f0fu, xa(j, 4 * m), s_lo);
#pragma unroll
    for (int m = 0; m < 4; ++m) s_hi = dot4<kBias>((w[m] >> 4) & 0x0f0f0f0fu, xa(j, 16 + 4 * m), s_hi);
    return s_lo + s_hi;
  } else {
    // nibble k of a word goes to bits 6..9 of a half (1 + n / 16), paired with nibble k + 4
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float4 xl = xa(j, 4 * m), xh = xa(j, 16 + 4 * m);
      const float2 f0 = half2_bits(((w[m] << 6) & 0x03c003c0u) | 0x3c003c00u);  // elements 4m, 4m + 2
      const float2 f1 = half2_bits(((w[m] << 2) & 0x03c003c0u) | 0x3c003c00u);  // 16 + 4m, 16 + 4m + 2
      const float2 f2 = half2_bits(((w[m] >> 2) & 0x03c003c0u) | 0x3c003c00u);  // 4m + 1, 4m + 3
      const float2 f3 = half2_bits(((w[m] >> 6) & 0x03c003c0u) | 0x3c003c00u);  // 16 + 4m + 1, + 3
      s_lo = fmaf(f0.x, xl.x, s_lo);
      s_lo = fmaf(f2.x, xl.y, s_lo);
      s_lo = fmaf(f0.y, xl.z, s_lo);
      s_lo = fmaf(f2.y, xl.w, s_lo);
      s_hi = fmaf(f1.x, xh.x, s_hi);
      s_hi = fmaf(f3.x, xh.y, s_hi);
      s_hi = fmaf(f1.y, xh.z, s_hi);
      s_hi = fmaf(f3.y, xh.w, s_hi);
    }
    return fix_sum<true, kBias, 16>(s_lo, S_lo) + fix_sum<true, kBias, 16>(s_hi, S_hi);
  }
}

template <bool kHalf>
struct FastQ4_0T {  // part = block: qs (16 B) | meta plane: fp16 d per block
  using Other = FastQ4_0T<!kHalf>;
  static constexpr GgmlType kType = GgmlType::Q4_0;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 32, kLoads = 1, kPartsPerBlock = 1;
  static constexpr int kMetaBytes = 2;
  struct Meta { uint16_t d; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int) { return {ld_u16(m + 2 * t)}; }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[32]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int b = byte_at(q[0], i);
      w[i] = i2f((b & 15) - 8) * d;
      w[i + 16] = i2f((b >> 4) - 8) * d;
    }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      float sx;
      acc[j] = fmaf(d, dot_q4_32<kHalf, 8>(q[0], xa, j, sx), acc[j]);
    }
  }
};

template <bool kHalf>
struct FastQ8_0T {  // part = half block: 16 int8 | meta plane: fp16 d per block
  using Other = FastQ8_0T<!kHalf>;
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 16, kLoads = 1, kPartsPerBlock = 2;
  static constexpr int kMetaBytes = 2;
  struct Meta { uint16_t d; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int) { return {ld_u16(m + 2 * (t / 2))}; }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[16]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int i = 0; i < 16; ++i) w[i] = i2f(static_cast<int8_t>(byte_at(q[0], i))) * d;
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
    const uint32_t w[4] = {q[0].x ^ 0x80808080u, q[0].y ^ 0x80808080u, q[0].z ^ 0x80808080u, q[0].w ^ 0x80808080u};
#pragma unroll
    for (int j = 0; j < N; ++j) {
      float s = 0.0f;
#pragma unroll
      for (int m = 0; m < 4; ++m) s = dot4b<kHalf, 128>(w[m], xa(j, 4 * m), s);
      acc[j] = fmaf(d, fix_sum<kHalf, 128>(s, kHalf ? xa.sum16(j, 0) : 0.0f), acc[j]);
    }
  }
};

// Q4_1, Q5_0, Q5_1: part = block of 32, qs as in the block (Q4_0 order) | meta planes per
// block: (Q5_0, Q5_1) the fifth bits as Q5_K's word h (permuted from qh, layout.cuh), fp16 d,
// (Q4_1, Q5_1) fp16 m. w = d (q - 16) (Q5_0) or d q + m, as RawLegacy (dev_raw_basic.cuh).
template <GgmlType T, bool kHalf>
struct FastLegacyT {
  using Other = FastLegacyT<T, !kHalf>;
  static constexpr GgmlType kType = T;
  static constexpr bool kMin = T == GgmlType::Q4_1 || T == GgmlType::Q5_1;
  static constexpr bool kFive = T == GgmlType::Q5_0 || T == GgmlType::Q5_1;
  static constexpr int kBias = kMin ? 0 : 16;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 32, kLoads = 1, kPartsPerBlock = 1;
  static constexpr int kMetaBytes = (kFive ? 4 : 0) + 2 + (kMin ? 2 : 0);
  struct Meta { uint32_t h; uint16_t d, mn; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int nb) {
    const uint8_t* dp = m + (kFive ? 4 * nb : 0);
    return {kFive ? __ldg(reinterpret_cast<const uint32_t*>(m + 4 * t)) : 0u, ld_u16(dp + 2 * t),
            kMin ? ld_u16(dp + 2 * nb + 2 * t) : uint16_t{0}};
  }
  // The values of elements 4m .. 4m + 3 (lo) and 16 + 4m .. 16 + 4m + 3 (hi), one per byte.
  __device__ static void values(const uint4& q, uint32_t h, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      lo[m] = w[m] & 0x0f0f0f0fu;
      hi[m] = (w[m] >> 4) & 0x0f0f0f0fu;
      if constexpr (kFive) lo[m] |= ((h >> m) << 4) & 0x10101010u, hi[m] |= (h >> m) & 0x10101010u;
    }
  }
  __device__ static float wval(int q, float d, float mn) {
    if constexpr (kMin) return __fadd_rn(__fmul_rn(i2f(q), d), mn);
    else return i2f(q - kBias) * d;
  }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[32]) {
    const float d = h2f(mt.d), mn = kMin ? h2f(mt.mn) : 0.0f;
    uint32_t lo[4], hi[4];
    values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      w[i] = wval(static_cast<int>((lo[i / 4] >> (8 * (i % 4))) & 0xff), d, mn);
      w[i + 16] = wval(static_cast<int>((hi[i / 4] >> (8 * (i % 4))) & 0xff), d, mn);
    }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
    uint32_t lo[4], hi[4];
    values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const float S_lo = xa.sum16(n, 0), S_hi = xa.sum16(n, 16);
      float s_lo = 0.0f, s_hi = 0.0f;
#pragma unroll
      for (int m = 0; m < 4; ++m) s_lo = dot4b<kHalf, kBias>(lo[m], xa(n, 4 * m), s_lo);
#pragma unroll
      for (int m = 0; m < 4; ++m) s_hi = dot4b<kHalf, kBias>(hi[m], xa(n, 16 + 4 * m), s_hi);
      acc[n] = fmaf(d, fix_sum<kHalf, kBias>(s_lo, S_lo) + fix_sum<kHalf, kBias>(s_hi, S_hi), acc[n]);
      if constexpr (kMin) acc[n] = fmaf(h2f(mt.mn), S_lo + S_hi, acc[n]);
    }
  }
};

// Q4_K: part = sub-block s of 32 (nibbles repacked in Q4_0 order) | meta: the block's 16
// bytes d, dmin, scales[12]. w = (d sc) q - (dmin m): sum = (d sc) sum(q x) - (dmin m) sum(x).
template <bool kHalf>
struct FastQ4_KT {
  using Other = FastQ4_KT<!kHalf>;
  static constexpr GgmlType kType = GgmlType::Q4_K;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 32, kLoads = 1, kPartsPerBlock = 8;
  static constexpr int kMetaBytes = 16;
  struct Meta { uint4 v; int s; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int) {
    return {__ldg(reinterpret_cast<const uint4*>(m + 16 * (t / 8))), t % 8};
  }
  // d * scale and dmin * min of the part's sub-block, as the reference computes them.
  __device__ static void scale_min(const Meta& mt, float& dl, float& ml) {
    const float d = h2f(static_cast<uint16_t>(mt.v.x)), dmin = h2f(static_cast<uint16_t>(mt.v.x >> 16));
    const int j = mt.s, r = j & 3;
    const uint32_t b0 = (mt.v.y >> (8 * r)) & 0xff, b4 = (mt.v.z >> (8 * r)) & 0xff, b8 = (mt.v.w >> (8 * r)) & 0xff;
    int sc, mn;
    if (j < 4) {
      sc = b0 & 63, mn = b4 & 63;
    } else {
      sc = (b8 & 0xf) | ((b0 >> 6) << 4);
      mn = (b8 >> 4) | ((b4 >> 6) << 4);
    }
    dl = d * i2f(sc), ml = dmin * i2f(mn);
  }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[32]) {
    float dl, ml;
    scale_min(mt, dl, ml);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int b = byte_at(q[0], i);
      w[i] = __fmul_rn(dl, i2f(b & 15)) - ml;
      w[i + 16] = __fmul_rn(dl, i2f(b >> 4)) - ml;
    }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    float dl, ml;
    scale_min(mt, dl, ml);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float sx;
      const float sq = dot_q4_32<kHalf, 0>(q[0], xa, n, sx);
      acc[n] = fmaf(dl, sq, acc[n]);
      acc[n] = fmaf(-ml, sx, acc[n]);
    }
  }
};

// Q5_K: as Q4_K (part = sub-block s of 32, low nibbles in Q4_0 order, one word) plus the
// fifth bits in the meta plane: per block 48 bytes, d, dmin, scales[12] (as Q4_K), then per
// part s a 32-bit word h (layout.cuh): bit 8k + m = bit 4 of element 4m + k, bit 8k + 4 + m
// = bit 4 of element 16 + 4m + k (m, k < 4), so that the 5-bit values of nibble word m are
// (w & 0x0f0f0f0f) | ((h >> m) << 4 & 0x10101010) and ((w >> 4) & 0x0f0f0f0f) | ((h >> m) & 0x10101010).
template <bool kHalf>
struct FastQ5_KT {
  using Other = FastQ5_KT<!kHalf>;
  static constexpr GgmlType kType = GgmlType::Q5_K;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 32, kLoads = 1, kPartsPerBlock = 8;
  static constexpr int kMetaBytes = 48;
  struct Meta { uint4 v; uint32_t h; int s; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int) {
    const uint8_t* b = m + 48 * (t / 8);
    return {__ldg(reinterpret_cast<const uint4*>(b)), __ldg(reinterpret_cast<const uint32_t*>(b + 16 + 4 * (t % 8))), t % 8};
  }
  __device__ static void scale_min(const Meta& mt, float& dl, float& ml) {
    FastQ4_KT<kHalf>::scale_min(typename FastQ4_KT<kHalf>::Meta{mt.v, mt.s}, dl, ml);
  }
  // The 5-bit values of elements 4m .. 4m + 3 (lo) and 16 + 4m .. 16 + 4m + 3 (hi), one per byte.
  __device__ static void values(const uint4& q, uint32_t h, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      lo[m] = (w[m] & 0x0f0f0f0fu) | (((h >> m) << 4) & 0x10101010u);
      hi[m] = ((w[m] >> 4) & 0x0f0f0f0fu) | ((h >> m) & 0x10101010u);
    }
  }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[32]) {
    float dl, ml;
    scale_min(mt, dl, ml);
    uint32_t lo[4], hi[4];
    values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      w[i] = __fmul_rn(dl, i2f(static_cast<int>((lo[i / 4] >> (8 * (i % 4))) & 0xff))) - ml;
      w[i + 16] = __fmul_rn(dl, i2f(static_cast<int>((hi[i / 4] >> (8 * (i % 4))) & 0xff))) - ml;
    }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    float dl, ml;
    scale_min(mt, dl, ml);
    uint32_t lo[4], hi[4];
    values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const float S_lo = xa.sum16(n, 0), S_hi = xa.sum16(n, 16);
      float s_lo = 0.0f, s_hi = 0.0f;
#pragma unroll
      for (int m = 0; m < 4; ++m) s_lo = dot4b<kHalf, 0>(lo[m], xa(n, 4 * m), s_lo);
#pragma unroll
      for (int m = 0; m < 4; ++m) s_hi = dot4b<kHalf, 0>(hi[m], xa(n, 16 + 4 * m), s_hi);
      const float sq = fix_sum<kHalf, 0>(s_lo, S_lo) + fix_sum<kHalf, 0>(s_hi, S_hi);
      acc[n] = fmaf(dl, sq, acc[n]);
      acc[n] = fmaf(-ml, S_lo + S_hi, acc[n]);
    }
  }
};

// Q6_K: part u = elements 64u .. 64u + 63 of a block, 3 words: low 4 bits of elements 0..31
// and 32..63 (Q4_0 nibble order), then the high 2 bits (layout.cuh pack_q6k) | meta: the
// scales word of the part (4 int8) and the block's fp16 d.
template <bool kHalf>
struct FastQ6_KT {
  using Other = FastQ6_KT<!kHalf>;
  static constexpr GgmlType kType = GgmlType::Q6_K;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 64, kLoads = 3, kPartsPerBlock = 4;
  static constexpr int kMetaBytes = 18;  // 16 scales, then (in a second plane) d
  struct Meta { uint32_t sc; uint16_t d; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int nb) {
    return {__ldg(reinterpret_cast<const uint32_t*>(m + 16 * (t / 4) + 4 * (t % 4))), ld_u16(m + 16 * nb + 2 * (t / 4))};
  }
  __device__ static void dequant(const uint4 (&q)[3], Meta mt, float (&w)[64]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int b = byte_at(q[h], i), mm = i / 4, kk = i % 4;
        const int hb = byte_at(q[2], 4 * (2 * h + mm / 2) + kk);
        const int hlo = mm % 2 ? hb & 3 : (hb >> 4) & 3, hhi = mm % 2 ? (hb >> 2) & 3 : hb >> 6;
        const float dlo = d * i2f(static_cast<int8_t>((mt.sc >> (16 * h)) & 0xff));
        const float dhi = d * i2f(static_cast<int8_t>((mt.sc >> (16 * h + 8)) & 0xff));
        w[32 * h + i] = dlo * i2f(((b & 15) | (hlo << 4)) - 32);
        w[32 * h + 16 + i] = dhi * i2f(((b >> 4) | (hhi << 4)) - 32);
      }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[3], Meta mt, const X& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
    float dl[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) dl[k] = d * i2f(static_cast<int8_t>((mt.sc >> (8 * k)) & 0xff));
    const uint32_t qh[4] = {q[2].x, q[2].y, q[2].z, q[2].w};
#pragma unroll
    for (int n = 0; n < N; ++n) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t ql[4] = {h ? q[1].x : q[0].x, h ? q[1].y : q[0].y, h ? q[1].z : q[0].z, h ? q[1].w : q[0].w};
        float slo = 0.0f, shi = 0.0f;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const uint32_t hw = qh[2 * h + m / 2];
          if constexpr (!kHalf) {
            const uint32_t hlo = m % 2 ? hw << 4 : hw, hhi = m % 2 ? hw << 2 : hw >> 2;
            const uint32_t lo6 = (ql[m] & 0x0f0f0f0fu) | (hlo & 0x30303030u);
            const uint32_t hi6 = ((ql[m] >> 4) & 0x0f0f0f0fu) | (hhi & 0x30303030u);
            slo = dot4<32>(lo6, xa(n, 32 * h + 4 * m), slo);
            shi = dot4<32>(hi6, xa(n, 32 * h + 16 + 4 * m), shi);
          } else {  // the 6-bit values times 4 in each byte: 1 + q / 256
            const uint32_t hlo = m % 2 ? hw << 6 : hw << 2, hhi = m % 2 ? hw << 4 : hw;
            const uint32_t lo6 = ((ql[m] << 2) & 0x3c3c3c3cu) | (hlo & 0xc0c0c0c0u);
            const uint32_t hi6 = ((ql[m] >> 2) & 0x3c3c3c3cu) | (hhi & 0xc0c0c0c0u);
            slo = dot4b<true, 0>(lo6, xa(n, 32 * h + 4 * m), slo);
            shi = dot4b<true, 0>(hi6, xa(n, 32 * h + 16 + 4 * m), shi);
          }
        }
        if constexpr (kHalf) {
          slo = fix_sum<true, 32, 256>(slo, xa.sum16(n, 32 * h));
          shi = fix_sum<true, 32, 256>(shi, xa.sum16(n, 32 * h + 16));
        }
        acc[n] = fmaf(dl[2 * h], slo, acc[n]);
        acc[n] = fmaf(dl[2 * h + 1], shi, acc[n]);
      }
    }
  }
};

// IQ4_XS: part = 32 elements (qs as in the block) | meta: the block's first 8 bytes
// (d, scales_h, scales_l). Table lookup of 4 nibbles at a time with byte permutes over the
// table biased by +128 (as unsigned bytes), then the magic-number conversion.
template <bool kHalf>
struct FastIQ4_XST {
  using Other = FastIQ4_XST<!kHalf>;
  static constexpr GgmlType kType = GgmlType::IQ4_XS;
  static constexpr bool kSums = true, kGlobalX = false;
  static constexpr int kPartElems = 32, kLoads = 1, kPartsPerBlock = 8;
  static constexpr int kMetaBytes = 8;
  struct Meta { uint2 v; int ib; };
  __device__ static Meta load_meta(const uint8_t* m, int t, int) {
    return {__ldg(reinterpret_cast<const uint2*>(m + 8 * (t / 8))), t % 8};
  }
  // kvalues_iq4nl + 128: {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241}
  static constexpr uint32_t kT0 = 0x3f2d1801u, kT1 = 0x766a5d4fu, kT2 = 0xa6998d81u, kT3 = 0xf1d9c5b5u;
  __device__ static float block_scale(const Meta& mt) {
    const int ib = mt.ib;
    const float d = h2f(static_cast<uint16_t>(mt.v.x));
    const uint32_t scales_h = mt.v.x >> 16;
    const uint32_t sl = (mt.v.y >> (8 * (ib / 2))) & 0xff;
    const int ls = static_cast<int>(((sl >> (4 * (ib % 2))) & 0xf) | (((scales_h >> (2 * ib)) & 3) << 4));
    return d * i2f(ls - 32);
  }
  __device__ static void dequant(const uint4 (&q)[1], Meta mt, float (&w)[32]) {
    const float dl = block_scale(mt);
    constexpr uint32_t kT[4] = {kT0, kT1, kT2, kT3};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int b = byte_at(q[0], i), lo = b & 15, hi = b >> 4;
      w[i] = dl * i2f(static_cast<int>((kT[lo / 4] >> (8 * (lo % 4))) & 0xff) - 128);
      w[i + 16] = dl * i2f(static_cast<int>((kT[hi / 4] >> (8 * (hi % 4))) & 0xff) - 128);
    }
  }
  template <int N, class X>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const X& xa, float (&acc)[N]) {
    const float dl = block_scale(mt);
    const uint32_t w[4] = {q[0].x, q[0].y, q[0].z, q[0].w};
    // v[m][0]: bytes = values of nibbles 0..3 of word m (elements 4m, 16+4m, 4m+1, 16+4m+1),
    // v[m][1]: nibbles 4..7 (elements 4m+2, 16+4m+2, 4m+3, 16+4m+3).
    uint32_t v[4][2];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t sel = 0x32103210u | ((w[m] & 0x88888888u) >> 1);
#pragma unroll
      for (int g = 0; g < 2; ++g) {
        const uint32_t lo = __byte_perm(kT0, kT1, w[m] >> (16 * g));
        const uint32_t hi = __byte_perm(kT2, kT3, w[m] >> (16 * g));
        v[m][g] = __byte_perm(lo, hi, sel >> (16 * g));
      }
    }
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float s = 0.0f;
      if constexpr (!kHalf) {
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float4 xl = xa(n, 4 * m);
          s = fmaf(ubyte_f<128>(v[m][0], 0), xl.x, s);
          s = fmaf(ubyte_f<128>(v[m][0], 2), xl.y, s);
          s = fmaf(ubyte_f<128>(v[m][1], 0), xl.z, s);
          s = fmaf(ubyte_f<128>(v[m][1], 2), xl.w, s);
        }
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float4 xh = xa(n, 16 + 4 * m);
          s = fmaf(ubyte_f<128>(v[m][0], 1), xh.x, s);
          s = fmaf(ubyte_f<128>(v[m][0], 3), xh.y, s);
          s = fmaf(ubyte_f<128>(v[m][1], 1), xh.z, s);
          s = fmaf(ubyte_f<128>(v[m][1], 3), xh.w, s);
        }
      } else {  // bytes (value + 128) as 1 + b / 1024: (even bytes: low elements, odd: high)
        float sh = 0.0f;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const float4 xl = xa(n, 4 * m), xh = xa(n, 16 + 4 * m);
          const float2 a = half2_bits(__byte_perm(v[m][0], 0x3c3cu, 0x4240u));  // 4m, 4m + 1
          const float2 b = half2_bits(__byte_perm(v[m][1], 0x3c3cu, 0x4240u));  // 4m + 2, 4m + 3
          const float2 c = half2_bits(__byte_perm(v[m][0], 0x3c3cu, 0x4341u));  // 16 + 4m, + 1
          const float2 e = half2_bits(__byte_perm(v[m][1], 0x3c3cu, 0x4341u));  // 16 + 4m + 2, + 3
          s = fmaf(a.x, xl.x, s);
          s = fmaf(a.y, xl.y, s);
          s = fmaf(b.x, xl.z, s);
          s = fmaf(b.y, xl.w, s);
          sh = fmaf(c.x, xh.x, sh);
          sh = fmaf(c.y, xh.y, sh);
          sh = fmaf(e.x, xh.z, sh);
          sh = fmaf(e.y, xh.w, sh);
        }
        s = fix_sum<true, 128>(s, xa.sum16(n, 0)) + fix_sum<true, 128>(sh, xa.sum16(n, 16));
      }
      acc[n] = fmaf(dl, s, acc[n]);
    }
  }
};

// The conversion of each format's default: F32 for all of them (Q5_K, Q4_1, Q5_0, Q5_1: not measured) (on the H200 the half2 way was
// 5-25 % slower: the f16 -> f32 widening costs more than the integer work it saves;
// bench/cuda/README.md). The H16 way stays as the workbench's "other conversion" variant.
using FastQ4_0 = FastQ4_0T<false>;
using FastQ8_0 = FastQ8_0T<false>;
using FastQ4_K = FastQ4_KT<false>;
using FastQ5_K = FastQ5_KT<false>;
using FastQ4_1 = FastLegacyT<GgmlType::Q4_1, false>;
using FastQ5_0 = FastLegacyT<GgmlType::Q5_0, false>;
using FastQ5_1 = FastLegacyT<GgmlType::Q5_1, false>;
using FastQ6_K = FastQ6_KT<false>;
using FastIQ4_XS = FastIQ4_XST<false>;

// The formats of the f32-x planar kernels (family_fast.cu, the workbench's variants_fast.cu).
template <class... Fs>
struct FastList {};
using FastFormats = FastList<FastF32, FastF16, FastBF16, FastQ4_0, FastQ8_0, FastQ4_1, FastQ5_0, FastQ5_1, FastQ4_K,
                             FastQ5_K, FastQ6_K, FastIQ4_XS>;

}  // namespace df::cudamv
