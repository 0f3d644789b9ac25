// Fast matvec formats over the planar layout (layout.cuh): per row, L sub-planes of
// nparts x 16 bytes (uint4 word i of part t at q_row + (i * nparts + t) * 16, so one warp
// load reads 512 contiguous bytes), then the block meta (scales). Each struct:
//   kPartElems, kLoads, kPartsPerBlock; Meta, load_meta(m_row, t, nblocks);
//   dot<N>(q, meta, xa, acc): acc[j] += sum over the part of w * x[j] (xa(j, i): the float4 of
//     x row j at part element i), with the
//   block scale factored out of the part's sums (sum q x, then times d). The same
//   operations for every N, so rows stay bit-identical whatever n is.
// Integers become floats by the magic-number trick: the byte placed in the mantissa of
// 2^23 (one PRMT) minus 2^23 + bias (one FADD), exact.
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

__device__ __forceinline__ float sum4(float4 v, float s) { return ((s + v.x) + v.y + v.z) + v.w; }

// Byte i (compile-time) of a 16-byte word.
__device__ __forceinline__ int byte_at(const uint4& q, int i) {
  const uint32_t w = i < 4 ? q.x : i < 8 ? q.y : i < 12 ? q.z : q.w;
  return static_cast<int>((w >> (8 * (i % 4))) & 0xff);
}

// ---- float formats: raw rows are already planar with one 16-byte load per part ----
// Per format: kSums (dot uses xa.sum16), kGlobalX (x read straight from global memory is
// faster than the shared-memory copy: the float formats, whose x reads per weight byte are few).
struct FastF32 {
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

// sum_e q_e x_e over 32 nibbles q in Q4_0 order (byte i: element i low, element i + 16 high),
// two instructions per element. A nibble shifted to bits 15..18 (19..22) of the float
// 0x3F800000 reads as 1 + q / 256 (1 + q / 16): one LOP3, and one FMA into s15 (s19). With
// the 16-element sums S of x (xa.sum16), sum q x = 256 (s15 - S_lo) + 16 (s19 - S_hi). The
// rounding of the products is relative to |x|, 2^-24 |x| against a signal of q x / 256:
// about 2^-16 relative, NMSE ~1e-12 (the workbench measures it).
template <class X>
__device__ __forceinline__ float dot_q4_32(const uint4& q, const X& xa, int j, float& sum_x) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
  float s15 = 0.0f, s19 = 0.0f;
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    const float4 xl = xa(j, 4 * m), xh = xa(j, 16 + 4 * m);
    const float xls[4] = {xl.x, xl.y, xl.z, xl.w}, xhs[4] = {xh.x, xh.y, xh.z, xh.w};
#pragma unroll
    for (int b = 0; b < 4; ++b) {  // nibbles 2b (element 4m + b) and 2b + 1 (element 16 + 4m + b)
      const uint32_t u = b == 0 ? w[m] << 15 : b == 1 ? w[m] << 7 : b == 2 ? w[m] >> 1 : w[m] >> 9;
      s15 = fmaf(__uint_as_float((u & 0x00078000u) | 0x3f800000u), xls[b], s15);
      s19 = fmaf(__uint_as_float((u & 0x00780000u) | 0x3f800000u), xhs[b], s19);
    }
  }
  const float lo = xa.sum16(j, 0), hi = xa.sum16(j, 16);
  sum_x = lo + hi;
  return fmaf(256.0f, s15 - lo, 16.0f * (s19 - hi));
}

struct FastQ4_0 {  // part = block: qs (16 B) | meta plane: fp16 d per block
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
      const float sq = dot_q4_32(q[0], xa, j, sx);  // sum (q - 8) x = sum q x - 8 sum x
      acc[j] = fmaf(d, fmaf(-8.0f, sx, sq), acc[j]);
    }
  }
};

struct FastQ8_0 {  // part = half block: 16 int8 | meta plane: fp16 d per block
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr bool kSums = false, kGlobalX = false;
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
      for (int m = 0; m < 4; ++m) s = dot4<128>(w[m], xa(j, 4 * m), s);
      acc[j] = fmaf(d, s, acc[j]);
    }
  }
};

// Q4_K: part = sub-block s of 32 (nibbles repacked in Q4_0 order) | meta: the block's 16
// bytes d, dmin, scales[12]. w = (d sc) q - (dmin m): sum = (d sc) sum(q x) - (dmin m) sum(x).
struct FastQ4_K {
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
      const float sq = dot_q4_32(q[0], xa, n, sx);
      acc[n] = fmaf(dl, sq, acc[n]);
      acc[n] = fmaf(-ml, sx, acc[n]);
    }
  }
};

// Q6_K: part u = elements 64u .. 64u + 63 of a block, 3 words: low 4 bits of elements 0..31
// and 32..63 (Q4_0 nibble order), then the high 2 bits (layout.cuh pack_q6k) | meta: the
// scales word of the part (4 int8) and the block's fp16 d.
struct FastQ6_K {
  static constexpr GgmlType kType = GgmlType::Q6_K;
  static constexpr bool kSums = false, kGlobalX = false;
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
          const uint32_t hlo = m % 2 ? hw << 4 : hw, hhi = m % 2 ? hw << 2 : hw >> 2;
          const uint32_t lo6 = (ql[m] & 0x0f0f0f0fu) | (hlo & 0x30303030u);
          const uint32_t hi6 = ((ql[m] >> 4) & 0x0f0f0f0fu) | (hhi & 0x30303030u);
          slo = dot4<32>(lo6, xa(n, 32 * h + 4 * m), slo);
          shi = dot4<32>(hi6, xa(n, 32 * h + 16 + 4 * m), shi);
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
struct FastIQ4_XS {
  static constexpr GgmlType kType = GgmlType::IQ4_XS;
  static constexpr bool kSums = false, kGlobalX = false;
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
      acc[n] = fmaf(dl, s, acc[n]);
    }
  }
};

}  // namespace df::cudamv
