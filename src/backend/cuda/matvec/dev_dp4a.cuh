// Integer-dot matvec formats: the weights of the planar layout (dev_fast.cuh, layout.cuh),
// x rounded to int8 blocks of 32 in shared memory (xq.cuh). Per 16-byte weight word, the
// products are __dp4a's (4 int8 x 4 int8 -> int32, exact), the quants unpacked with 1-2
// integer ops per 4 values (none for Q8_0): about a quarter of the instructions of the
// f32 kernels' PRMT + FADD + FMA per element, which bound those well below the bandwidth.
// Then per block (or 16-group) one float: acc += (d_w d_x) * (sum q_w q_x - bias sum q_x),
// so a part's result is exact integer arithmetic and one fixed float order: the same for
// every N (rows bit-identical whatever n is).
//
// Numerics: the product of the exactly dequantized weights with x rounded to int8 as the CPU
// engine rounds the activations of the format's dot (xq.cuh: Q8_0 for Q8_0 / Q4_0 / Q5_0 and
// the quants of Q8_1 for Q5_1, Q8_K for
// the K-quants (Q4_K, Q5_K, Q6_K) and IQ4_XS): the CPU's products up to the order of the float sums; against
// the f64 dot of unrounded x, the rounding costs NMSE ~1e-5 for uniform x.
//
// Each struct: the planar format F's Meta and load_meta, kInt8X = true, kQ8K, and
//   dot<N>(q, meta, xa, acc): xa an XQ (xq.cuh) at the part.
#pragma once
#include "backend/cuda/matvec/dev_fast.cuh"
#include "backend/cuda/matvec/xq.cuh"

namespace df::cudamv {

__device__ __forceinline__ int dp4a(uint32_t a, int b, int c) { return __dp4a(static_cast<int>(a), b, c); }

// sum over the 32 nibbles of a Q4_0-ordered word (byte i: element i low, element i + 16
// high) times the int8 x words x0 (elements 0..15), x1 (16..31).
__device__ __forceinline__ int dot_nib32(const uint4& q, const int4& x0, const int4& x1) {
  constexpr uint32_t M = 0x0f0f0f0fu;
  int s = dp4a(q.x & M, x0.x, 0);
  s = dp4a(q.y & M, x0.y, s);
  s = dp4a(q.z & M, x0.z, s);
  s = dp4a(q.w & M, x0.w, s);
  s = dp4a((q.x >> 4) & M, x1.x, s);
  s = dp4a((q.y >> 4) & M, x1.y, s);
  s = dp4a((q.z >> 4) & M, x1.z, s);
  s = dp4a((q.w >> 4) & M, x1.w, s);
  return s;
}

// kDefaultU: parts in flight per lane at n <= 2, the fastest of the workbench's variants at
// two rows per warp on the H200 (bench/cuda/README.md).
struct Dp4aQ8_0 : FastQ8_0 {  // part = 16 int8 (half a block): 4 dp4a
  static constexpr bool kInt8X = true, kQ8K = false;
  static constexpr int kDefaultU = 1;
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int4 xv = xa.word(j, 0);
      int s = dp4a(q[0].x, xv.x, 0);
      s = dp4a(q[0].y, xv.y, s);
      s = dp4a(q[0].z, xv.z, s);
      s = dp4a(q[0].w, xv.w, s);
      acc[j] = fmaf(d * xq_d(xa.meta(j, 0)), i2f(s), acc[j]);
    }
  }
};

struct Dp4aQ4_0 : FastQ4_0 {  // part = block: sum (q - 8) x = sum q x - 8 sum x
  static constexpr bool kInt8X = true, kQ8K = false;
  static constexpr int kDefaultU = 1;
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int2 m = xa.meta(j, 0);
      const int s = dot_nib32(q[0], xa.word(j, 0), xa.word(j, 1)) - 8 * xq_s(m);
      acc[j] = fmaf(d * xq_d(m), i2f(s), acc[j]);
    }
  }
};

// Q5_0, Q5_1 (part = block): sum (q - 16) x (Q5_0) or d sum q x + m sum x. x rounded as Q8_0
// (Q5_0's activations; Q5_1 takes Q8_1's, the same quants and d: the CPU's min term m s with
// s = fp16(d_x sum q_x) is here m d_x sum q_x in f32). Q4_1 has no int8-x family: at
// 5x2560 its int8-x NMSE was 1.02e-4, over test_matvec_cuda's 1e-4 (H200, 2026-12-02), so it
// keeps the f32-x kernels of its planar layout.
template <GgmlType T>
struct Dp4aLegacy : FastLegacyT<T, false> {
  using F = FastLegacyT<T, false>;
  using typename F::Meta;
  static constexpr bool kInt8X = true, kQ8K = false;
  static constexpr int kDefaultU = 1;  // Q4_0's (not measured for these)
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
    uint32_t lo[4], hi[4];
    F::values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int2 m = xa.meta(j, 0);
      const float dx = xq_d(m);
      const int4 x0 = xa.word(j, 0), x1 = xa.word(j, 1);
      int s = dp4a(lo[0], x0.x, 0);
      s = dp4a(lo[1], x0.y, s);
      s = dp4a(lo[2], x0.z, s);
      s = dp4a(lo[3], x0.w, s);
      s = dp4a(hi[0], x1.x, s);
      s = dp4a(hi[1], x1.y, s);
      s = dp4a(hi[2], x1.z, s);
      s = dp4a(hi[3], x1.w, s);
      if constexpr (F::kMin) {
        acc[j] = fmaf(d * dx, i2f(s), acc[j]);
        acc[j] = fmaf(h2f(mt.mn), dx * i2f(xq_s(m)), acc[j]);
      } else {
        acc[j] = fmaf(d * dx, i2f(s - F::kBias * xq_s(m)), acc[j]);
      }
    }
  }
};
using Dp4aQ5_0 = Dp4aLegacy<GgmlType::Q5_0>;
using Dp4aQ5_1 = Dp4aLegacy<GgmlType::Q5_1>;

struct Dp4aQ4_K : FastQ4_K {  // part = sub-block of 32: (d sc) sum q x - (dmin m) sum x
  static constexpr bool kInt8X = true, kQ8K = true;
  static constexpr int kDefaultU = 4;
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    float dl, ml;
    scale_min(mt, dl, ml);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int2 m = xa.meta(j, 0);
      const float dx = xq_d(m);
      const int s = dot_nib32(q[0], xa.word(j, 0), xa.word(j, 1));
      acc[j] = fmaf(dl * dx, i2f(s), acc[j]);
      acc[j] = fmaf(-ml * dx, i2f(xq_s(m)), acc[j]);
    }
  }
};

// Q5_K: Q4_K's sums with the fifth bit merged into the nibbles (dev_fast.cuh FastQ5_K).
struct Dp4aQ5_K : FastQ5_K {
  static constexpr bool kInt8X = true, kQ8K = true;
  static constexpr int kDefaultU = 4;  // Q4_K's (not measured for Q5_K)
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    float dl, ml;
    scale_min(mt, dl, ml);
    uint32_t lo[4], hi[4];
    values(q[0], mt.h, lo, hi);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int2 m = xa.meta(j, 0);
      const float dx = xq_d(m);
      const int4 x0 = xa.word(j, 0), x1 = xa.word(j, 1);
      int s = dp4a(lo[0], x0.x, 0);
      s = dp4a(lo[1], x0.y, s);
      s = dp4a(lo[2], x0.z, s);
      s = dp4a(lo[3], x0.w, s);
      s = dp4a(hi[0], x1.x, s);
      s = dp4a(hi[1], x1.y, s);
      s = dp4a(hi[2], x1.z, s);
      s = dp4a(hi[3], x1.w, s);
      acc[j] = fmaf(dl * dx, i2f(s), acc[j]);
      acc[j] = fmaf(-ml * dx, i2f(xq_s(m)), acc[j]);
    }
  }
};

// Q6_K: part = 64 elements (4 groups of 16, each its int8 scale), words: low nibbles of
// elements 0..31 and 32..63 (Q4_0 order), their high 2 bits (layout.cuh). q in 0..63:
// sum (q - 32) x = sum q x - 32 sum x per 16-group.
struct Dp4aQ6_K : FastQ6_K {
  static constexpr bool kInt8X = true, kQ8K = true;
  static constexpr int kDefaultU = 1;
  template <int N>
  __device__ static void dot(const uint4 (&q)[3], Meta mt, const XQ& xa, float (&acc)[N]) {
    const float d = h2f(mt.d);
    float dl[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) dl[k] = d * i2f(static_cast<int8_t>((mt.sc >> (8 * k)) & 0xff));
    const uint32_t qh[4] = {q[2].x, q[2].y, q[2].z, q[2].w};
    uint32_t v6[4][4];  // [group][word]: the 6-bit values of elements 16 g + 4 m .. + 3
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t ql[4] = {h ? q[1].x : q[0].x, h ? q[1].y : q[0].y, h ? q[1].z : q[0].z, h ? q[1].w : q[0].w};
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        const uint32_t hw = qh[2 * h + m / 2];
        const uint32_t hlo = m % 2 ? hw << 4 : hw, hhi = m % 2 ? hw << 2 : hw >> 2;
        v6[2 * h][m] = (ql[m] & 0x0f0f0f0fu) | (hlo & 0x30303030u);
        v6[2 * h + 1][m] = ((ql[m] >> 4) & 0x0f0f0f0fu) | (hhi & 0x30303030u);
      }
    }
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int2 m0 = xa.meta(j, 0), m1 = xa.meta(j, 1);
      const int sx[4] = {xq_s0(m0), xq_s1(m0), xq_s0(m1), xq_s1(m1)};
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const int4 xv = xa.word(j, g);
        int s = dp4a(v6[g][0], xv.x, 0);
        s = dp4a(v6[g][1], xv.y, s);
        s = dp4a(v6[g][2], xv.z, s);
        s = dp4a(v6[g][3], xv.w, s);
        acc[j] = fmaf(dl[g] * xq_d(g < 2 ? m0 : m1), i2f(s - 32 * sx[g]), acc[j]);
      }
    }
  }
};

// IQ4_XS: the non-linear values (signed int8 table) looked up 4 nibbles at a time with byte
// permutes, reordered to 4 consecutive elements per word, then dp4a.
struct Dp4aIQ4_XS : FastIQ4_XS {
  static constexpr bool kInt8X = true, kQ8K = true;
  static constexpr int kDefaultU = 2;
  // kvalues_iq4nl as int8 bytes (FastIQ4_XS's table minus the +128 bias)
  static constexpr uint32_t kS0 = kT0 ^ 0x80808080u, kS1 = kT1 ^ 0x80808080u, kS2 = kT2 ^ 0x80808080u,
                            kS3 = kT3 ^ 0x80808080u;
  template <int N>
  __device__ static void dot(const uint4 (&q)[1], Meta mt, const XQ& xa, float (&acc)[N]) {
    const float dl = block_scale(mt);
    const uint32_t w[4] = {q[0].x, q[0].y, q[0].z, q[0].w};
    uint32_t lo[4], hi[4];  // values of elements 4m .. 4m + 3 and 16 + 4m .. 16 + 4m + 3
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint32_t sel = 0x32103210u | ((w[m] & 0x88888888u) >> 1);
      uint32_t v[2];
#pragma unroll
      for (int g = 0; g < 2; ++g) {
        const uint32_t a = __byte_perm(kS0, kS1, w[m] >> (16 * g));
        const uint32_t b = __byte_perm(kS2, kS3, w[m] >> (16 * g));
        v[g] = __byte_perm(a, b, sel >> (16 * g));
      }
      lo[m] = __byte_perm(v[0], v[1], 0x6420);
      hi[m] = __byte_perm(v[0], v[1], 0x7531);
    }
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int4 x0 = xa.word(j, 0), x1 = xa.word(j, 1);
      int s = dp4a(lo[0], x0.x, 0);
      s = dp4a(lo[1], x0.y, s);
      s = dp4a(lo[2], x0.z, s);
      s = dp4a(lo[3], x0.w, s);
      s = dp4a(hi[0], x1.x, s);
      s = dp4a(hi[1], x1.y, s);
      s = dp4a(hi[2], x1.z, s);
      s = dp4a(hi[3], x1.w, s);
      acc[j] = fmaf(dl * xq_d(xa.meta(j, 0)), i2f(s), acc[j]);
    }
  }
};

// The int8-x formats (family_dp4a.cu, the workbench's variants_dp4a*.cu).
template <class... Fs>
struct Dp4aList {};
using Dp4aFormats = Dp4aList<Dp4aQ8_0, Dp4aQ4_0, Dp4aQ5_0, Dp4aQ5_1, Dp4aQ4_K, Dp4aQ5_K, Dp4aQ6_K, Dp4aIQ4_XS>;

}  // namespace df::cudamv
