// int8-x dots over raw ggml blocks (the GGUF bytes, rows padded to 16 bytes): Q2_K, Q3_K,
// IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0, TQ2_0, TQ1_0. x is rounded to int8 as the CPU engine rounds the
// activations of the format's dot (xq.cuh: Q8_K for Q2_K, Q3_K, TQ2_0, TQ1_0; Q8_0 for the others),
// the weights' quants unpacked into int8 words (4 consecutive elements a word) and multiplied
// by __dp4a; per part and x row, the integer sums take the scales in one or two float FMAs.
// A part's result is exact integer arithmetic and a fixed float order: the same for every N.
//
// Each struct (the contract of RawI8Adapter, family_i8.cuh):
//   kType, kBlockElems, kBlockBytes, kParts, kPartElems (block = kParts parts of consecutive
//   elements), kQ8K (x rounding);
//   Part: the part's raw bytes in registers; load(block, part, r) only issues the loads (the
//   values are used in dot, so the loads of several parts are in flight together);
//   dot<N>(r, tables, xa, acc): acc[j] += sum over the part of w * x[j] (x as int8 times d).
// All __host__ __device__: tests/cuda/test_i8raw_host.cu runs them on the CPU.
#pragma once
#include "backend/cuda/matvec/dev_i8util.cuh"
#include "quant/types.h"

namespace df::cudamv::i8 {

// acc[j] += a * (row j's x scale) * v.
__host__ __device__ __forceinline__ void add(float& acc, float a, const XQ& xa, int j, int v) {
  acc = fmaf(a * xq_d(xa.meta(j, 0)), i2f(v), acc);
}

// acc[j] += a * d_x * (k0 * sum over elements 0..15 + k1 * over 16..31) of the values v with x row j.
template <int N>
__host__ __device__ __forceinline__ void add_halves(const uint32_t (&v)[8], const XQ& xa, float a, int k0, int k1,
                                                    float (&acc)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const Sums2 s = dot32(v, xa, j);
    add(acc[j], a, xa, j, k0 * s.lo + k1 * s.hi);
  }
}

struct Q2_K {  // scales[16] qs[64] d dmin; part p: 2-bit plane p % 4 of qs[32 (p / 4) ..]
  static constexpr GgmlType kType = GgmlType::Q2_K;
  static constexpr int kBlockElems = 256, kBlockBytes = 84, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t q[8], dd;
    uint16_t sc;
    uint8_t p;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    ldw(b + 16 + 32 * (p / 4), r.q);
    r.dd = ld_u32_a2(b + 80);
    r.sc = ld_u16(b + 2 * p);
    r.p = static_cast<uint8_t>(p);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    const unsigned sh = 2 * (r.p % 4);
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = (r.q[k] >> sh) & 0x03030303u;
    const float d = h2f(static_cast<uint16_t>(r.dd)), dmin = h2f(static_cast<uint16_t>(r.dd >> 16));
    const int sc0 = r.sc & 0xf, m0 = (r.sc >> 4) & 0xf, sc1 = (r.sc >> 8) & 0xf, m1 = r.sc >> 12;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      const int2 mt = xa.meta(j, 0);
      const float dx = xq_d(mt);
      acc[j] = fmaf(d * dx, i2f(sc0 * s.lo + sc1 * s.hi), acc[j]);
      acc[j] = fmaf(-dmin * dx, i2f(m0 * xq_s0(mt) + m1 * xq_s1(mt)), acc[j]);
    }
  }
};

struct Q3_K {  // hmask[32] qs[64] scales[12] d; value (2-bit plane | high bit << 2) - 4
  static constexpr GgmlType kType = GgmlType::Q3_K;
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t q[8], hm[8], sc[3];
    uint16_t d;
    uint8_t p;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    ldw(b, r.hm);
    ldw(b + 32 + 32 * (p / 4), r.q);
    ldw(b + 96, r.sc);
    r.d = ld_u16(b + 108);
    r.p = static_cast<uint8_t>(p);
  }
  // The 6-bit scale of 16-group s (0..15), minus 32.
  __host__ __device__ static int scale(const uint32_t (&sc)[3], int s) {
    const uint64_t lo8 = uint64_t{sc[0]} | (uint64_t{sc[1]} << 32);
    const int byte = static_cast<int>((lo8 >> (8 * (s & 7))) & 0xff);
    const int lo = s < 8 ? byte & 0xf : byte >> 4;
    const int hi = static_cast<int>((sc[2] >> (8 * (s % 4) + 2 * (s / 4))) & 3);
    return (lo | (hi << 4)) - 32;
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    const unsigned sh = 2 * (r.p % 4);
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = ((r.q[k] >> sh) & 0x03030303u) | (((r.hm[k] >> r.p) & 0x01010101u) << 2);
    const float d = h2f(r.d);
    const int sc0 = scale(r.sc, 2 * r.p), sc1 = scale(r.sc, 2 * r.p + 1);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      const int2 mt = xa.meta(j, 0);
      add(acc[j], d, xa, j, sc0 * (s.lo - 4 * xq_s0(mt)) + sc1 * (s.hi - 4 * xq_s1(mt)));
    }
  }
};

// 16-entry tables as int8 words (entry e in byte e % 4 of word e / 4), for lut16.
// kvalues_iq4nl (src/quant/iq_tables.cpp kIq4nlValues; the test checks these words against it)
constexpr uint32_t kNl0 = 0xbfad9881u, kNl1 = 0xf6eaddcfu, kNl2 = 0x26190d01u, kNl3 = 0x71594535u;
// kvalues_fp4 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12} (formats_fp4.h kValuesFp4)
constexpr uint32_t kFp0 = 0x03020100u, kFp1 = 0x0c080604u, kFp2 = 0xfdfeff00u, kFp3 = 0xf4f8fafcu;

// A 32-element block of 16 nibble bytes (byte i: element i low, i + 16 high) through a table.
template <uint32_t T0, uint32_t T1, uint32_t T2, uint32_t T3>
__host__ __device__ __forceinline__ void nib_values(const uint32_t (&q)[4], uint32_t (&v)[8]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) lut16(q[m], T0, T1, T2, T3, v[m], v[4 + m]);
}

// 32-element blocks of a scale then 16 nibble bytes through a value table: IQ4_NL (fp16 d, the
// kvalues_iq4nl), MXFP4 (E8M0 e, halved, the kvalues_fp4).
template <GgmlType T, int kScaleBytes, uint32_t T0, uint32_t T1, uint32_t T2, uint32_t T3>
struct NibTable {
  static constexpr GgmlType kType = T;
  static constexpr int kBlockElems = 32, kBlockBytes = kScaleBytes + 16, kParts = 1, kPartElems = 32;
  static constexpr bool kQ8K = false;
  struct Part {
    uint32_t q[4];
    uint16_t sc;
  };
  __host__ __device__ static void load(const uint8_t* b, int, Part& r) {
    ldw(b + kScaleBytes, r.q);
    r.sc = kScaleBytes == 2 ? ld_u16(b) : b[0];
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
    nib_values<T0, T1, T2, T3>(r.q, v);
    const float d = kScaleBytes == 2 ? h2f(r.sc) : e8m0_half(static_cast<uint8_t>(r.sc));
    add_halves<N>(v, xa, d, 1, 1, acc);
  }
};
using IQ4_NL = NibTable<GgmlType::IQ4_NL, 2, kNl0, kNl1, kNl2, kNl3>;
using Mxfp4 = NibTable<GgmlType::MXFP4, 1, kFp0, kFp1, kFp2, kFp3>;

struct Nvfp4 {  // scales[4] qs[32]; part s = 16 elements: scale s, bytes 8 s .. (element k low, k + 8 high)
  static constexpr GgmlType kType = GgmlType::NVFP4;
  static constexpr int kBlockElems = 64, kBlockBytes = 36, kParts = 4, kPartElems = 16;
  static constexpr bool kQ8K = false;
  struct Part {
    uint32_t q[2];
    uint8_t sc;
  };
  __host__ __device__ static void load(const uint8_t* b, int s, Part& r) {
    ldw(b + 4 + 8 * s, r.q);
    r.sc = b[s];
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    uint32_t lo[2], hi[2];
    lut16(r.q[0], kFp0, kFp1, kFp2, kFp3, lo[0], hi[0]);
    lut16(r.q[1], kFp0, kFp1, kFp2, kFp3, lo[1], hi[1]);
    const float d = ue4m3_half(r.sc);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int4 x = xa.word(j, 0);
      int s = dp4a(lo[0], static_cast<uint32_t>(x.x), 0);
      s = dp4a(lo[1], static_cast<uint32_t>(x.y), s);
      s = dp4a(hi[0], static_cast<uint32_t>(x.z), s);
      s = dp4a(hi[1], static_cast<uint32_t>(x.w), s);
      add(acc[j], d, xa, j, s);
    }
  }
};

struct Q1_0 {  // d qs[16]: bit e -> +d, else -d; part p = bits 32 p ..
  static constexpr GgmlType kType = GgmlType::Q1_0;
  static constexpr int kBlockElems = 128, kBlockBytes = 18, kParts = 4, kPartElems = 32;
  static constexpr bool kQ8K = false;
  struct Part {
    uint32_t bits;
    uint16_t d;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    r.bits = ld_u32_a2(b + 2 + 4 * p);
    r.d = ld_u16(b);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = ones4(r.bits >> (4 * k));
    const float d = h2f(r.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      add(acc[j], d, xa, j, 2 * (s.lo + s.hi) - xq_s(xa.meta(j, 0)));  // sum (2 b - 1) x
    }
  }
};

struct Q2_0 {  // d qs[16]: 2-bit q, value q - 1; part p = bytes 8 p ..
  static constexpr GgmlType kType = GgmlType::Q2_0;
  static constexpr int kBlockElems = 64, kBlockBytes = 18, kParts = 2, kPartElems = 32;
  static constexpr bool kQ8K = false;
  struct Part {
    uint32_t q[2];
    uint16_t d;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    ldw(b + 2 + 8 * p, r.q);
    r.d = ld_u16(b);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = spread2((r.q[0] >> (8 * k)) & 0xffu);
      v[4 + k] = spread2((r.q[1] >> (8 * k)) & 0xffu);
    }
    const float d = h2f(r.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      add(acc[j], d, xa, j, s.lo + s.hi - xq_s(xa.meta(j, 0)));
    }
  }
};

struct TQ2_0 {  // qs[64] d: part p = 2-bit plane p % 4 of qs[32 (p / 4) ..], value q - 1
  static constexpr GgmlType kType = GgmlType::TQ2_0;
  static constexpr int kBlockElems = 256, kBlockBytes = 66, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t q[8];
    uint16_t d;
    uint8_t p;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    ldw(b + 32 * (p / 4), r.q);
    r.d = ld_u16(b + 64);
    r.p = static_cast<uint8_t>(p);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    const unsigned sh = 2 * (r.p % 4);
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = (r.q[k] >> sh) & 0x03030303u;
    const float d = h2f(r.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      add(acc[j], d, xa, j, s.lo + s.hi - xq_s(xa.meta(j, 0)));
    }
  }
};

// Trits n (0..4, per byte: (byte * 3^n mod 256) * 3 / 256) of the 4 bytes of w, as bytes 0..2:
// the even and odd bytes in 16-bit lanes (byte * 81 < 2^16), so no product crosses a byte lane.
__host__ __device__ __forceinline__ uint32_t trits4(uint32_t w, uint32_t pow3) {
  const uint32_t e = ((w & 0x00ff00ffu) * pow3) & 0x00ff00ffu, o = (((w >> 8) & 0x00ff00ffu) * pow3) & 0x00ff00ffu;
  return (((e * 3u) >> 8) & 0x00030003u) | ((((o * 3u) >> 8) & 0x00030003u) << 8);
}

struct TQ1_0 {  // qs[48] qh[4] d: 5 trits a byte of qs, 4 of qh; value trit - 1
  static constexpr GgmlType kType = GgmlType::TQ1_0;
  static constexpr int kBlockElems = 256, kBlockBytes = 54, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t w[13];  // qs[0..47], qh
    uint16_t d;
    uint8_t p;
  };
  __host__ __device__ static void load(const uint8_t* b, int p, Part& r) {
    ldw(b, r.w);
    r.d = ld_u16(b + 52);
    r.p = static_cast<uint8_t>(p);
  }
  // Word k of part p (elements 4 k .. 4 k + 3; the order of src/quant's tq1_0_values): parts
  // 0..4 trit p of qs[4 k ..]; parts 5, 6 trit 2 (p - 5) (k < 4) or + 1 of qs[32 + 4 (k % 4) ..];
  // part 7 trit 4 of qs[32 + 4 k ..] (k < 4), then trit k - 4 of qh.
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables*, const XQ& xa, float (&acc)[N]) {
    constexpr uint64_t kPow3 = 0x00000051'1b090301ull;  // 3^n in byte n
    const int p = r.p;
    uint32_t v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const uint32_t src = p < 5 ? r.w[k] : k < 4 ? r.w[8 + k] : p == 7 ? r.w[12] : r.w[4 + k];
      const int n = p < 5 ? p : p < 7 ? 2 * (p - 5) + (k >= 4) : k < 4 ? 4 : k - 4;
      v[k] = trits4(src, static_cast<uint32_t>((kPow3 >> (8 * n)) & 0xff));
    }
    const float d = h2f(r.d);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      add(acc[j], d, xa, j, s.lo + s.hi - xq_s(xa.meta(j, 0)));
    }
  }
};

}  // namespace df::cudamv::i8
