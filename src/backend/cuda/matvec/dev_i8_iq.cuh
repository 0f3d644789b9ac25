// int8-x dots over raw ggml blocks of the IQ grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
// IQ3_S, IQ1_S, IQ1_M): x rounded as Q8_K (the CPU engine's activations of these formats).
// The grid entries (DevTables) are the int8 magnitudes of 4 or 8 elements; their signs are
// applied per byte ((g ^ m) - m with m the byte masks of the sign bits); the block scales
// 0.5 + ls (IQ2: times 1/4, IQ3_XXS: 1/2) are taken as the odd integers 2 ls + 1 and the
// power of two after the integer sums. The contract of dev_i8_basic.cuh.
#pragma once
#include "backend/cuda/matvec/dev_i8_basic.cuh"

namespace df::cudamv::i8 {

__host__ __device__ __forceinline__ uint32_t lo32(uint64_t g) { return static_cast<uint32_t>(g); }
__host__ __device__ __forceinline__ uint32_t hi32(uint64_t g) { return static_cast<uint32_t>(g >> 32); }
__host__ __device__ __forceinline__ uint32_t byte_at(uint32_t w, int k) { return (w >> (8 * k)) & 0xffu; }

// Value words 2 l, 2 l + 1 (elements 8 l .. 8 l + 7): the grid magnitudes g (bytes 0..7) with the
// sign bits sg (bit j: element 8 l + j negative).
__host__ __device__ __forceinline__ void signed8(uint64_t g, uint32_t sg, uint32_t (&v)[8], int l) {
  v[2 * l] = signed4(lo32(g), mask4(sg));
  v[2 * l + 1] = signed4(hi32(g), mask4(sg >> 4));
}

struct IQ2_XXS {  // d qs[u16 x 32]: per part 4 grid bytes, then 4 x 7 sign bits and the 4-bit scale
  static constexpr GgmlType kType = GgmlType::IQ2_XXS;
  static constexpr int kBlockElems = 256, kBlockBytes = 66, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t a[2];
    uint16_t d;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    ldw(b + 2 + 8 * ib, r.a);
    r.d = ld_u16(b);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      signed8(T->iq2xxs[byte_at(r.a[0], l)], T->signs[(r.a[1] >> (7 * l)) & 127], v, l);
    }
    const int ls = 2 * static_cast<int>(r.a[1] >> 28) + 1;
    add_halves<N>(v, xa, h2f(r.d) * 0.125f, ls, ls, acc);
  }
};

struct IQ2_XS {  // d qs[u16 x 32] scales[8]: per 8 elements 9 grid bits and 7 sign bits
  static constexpr GgmlType kType = GgmlType::IQ2_XS;
  static constexpr int kBlockElems = 256, kBlockBytes = 74, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t a[2];
    uint16_t d;
    uint8_t sc;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    ldw(b + 2 + 8 * ib, r.a);
    r.d = ld_u16(b);
    r.sc = b[66 + ib];
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t q = (r.a[l / 2] >> (16 * (l % 2))) & 0xffffu;
      signed8(T->iq2xs[q & 511], T->signs[q >> 9], v, l);
    }
    add_halves<N>(v, xa, h2f(r.d) * 0.125f, 2 * (r.sc & 0xf) + 1, 2 * (r.sc >> 4) + 1, acc);
  }
};

struct IQ2_S {  // d qs[64] (32 grid bytes, 32 sign bytes) qh[8] scales[8]
  static constexpr GgmlType kType = GgmlType::IQ2_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 82, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t qs, sg;
    uint16_t d;
    uint8_t qh, sc;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    r.qs = ld_u32_a2(b + 2 + 4 * ib);
    r.sg = ld_u32_a2(b + 34 + 4 * ib);
    r.d = ld_u16(b);
    r.qh = b[66 + ib];
    r.sc = b[74 + ib];
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t i = byte_at(r.qs, l) | ((static_cast<uint32_t>(r.qh) << (8 - 2 * l)) & 0x300u);
      signed8(T->iq2s[i], byte_at(r.sg, l), v, l);
    }
    add_halves<N>(v, xa, h2f(r.d) * 0.125f, 2 * (r.sc & 0xf) + 1, 2 * (r.sc >> 4) + 1, acc);
  }
};

struct IQ3_XXS {  // d qs[64] (grid bytes) aux[u32 x 8] (4 x 7 sign bits, the 4-bit scale)
  static constexpr GgmlType kType = GgmlType::IQ3_XXS;
  static constexpr int kBlockElems = 256, kBlockBytes = 98, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t q[2], aux;
    uint16_t d;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    ldw(b + 2 + 8 * ib, r.q);
    r.aux = ld_u32_a2(b + 66 + 4 * ib);
    r.d = ld_u16(b);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = T->iq3xxs[byte_at(r.q[l / 2], 2 * (l % 2))] |
                         (uint64_t{T->iq3xxs[byte_at(r.q[l / 2], 2 * (l % 2) + 1)]} << 32);
      signed8(g, T->signs[(r.aux >> (7 * l)) & 127], v, l);
    }
    const int ls = 2 * static_cast<int>(r.aux >> 28) + 1;
    add_halves<N>(v, xa, h2f(r.d) * 0.25f, ls, ls, acc);
  }
};

struct IQ3_S {  // d qs[64] qh[8] signs[32] scales[4]
  static constexpr GgmlType kType = GgmlType::IQ3_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t q[2], sg;
    uint16_t d;
    uint8_t qh, sc, ib;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    ldw(b + 2 + 8 * ib, r.q);
    r.sg = ld_u32_a2(b + 74 + 4 * ib);
    r.d = ld_u16(b);
    r.qh = b[66 + ib];
    r.sc = b[106 + ib / 2];
    r.ib = static_cast<uint8_t>(ib);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
    const uint32_t qh = r.qh;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t i1 = byte_at(r.q[l / 2], 2 * (l % 2)) | ((qh << (8 - 2 * l)) & 256u);
      const uint32_t i2 = byte_at(r.q[l / 2], 2 * (l % 2) + 1) | ((qh << (7 - 2 * l)) & 256u);
      signed8(T->iq3s[i1] | (uint64_t{T->iq3s[i2]} << 32), byte_at(r.sg, l), v, l);
    }
    const int ls = 2 * ((r.sc >> (4 * (r.ib % 2))) & 0xf) + 1;
    add_halves<N>(v, xa, h2f(r.d), ls, ls, acc);
  }
};

// IQ1: w = dl (g + delta), g in {-1, 0, 1} (the grid's signed bytes), delta = +-1/8:
// sum w x = dl / 8 (8 sum g x +- sum x).
struct IQ1_S {  // d qs[32] qh[u16 x 8]
  static constexpr GgmlType kType = GgmlType::IQ1_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 50, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t qs;
    uint16_t d, qh;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    r.qs = ld_u32_a2(b + 2 + 4 * ib);
    r.d = ld_u16(b);
    r.qh = ld_u16(b + 34 + 2 * ib);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
    const uint32_t qh = r.qh;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = T->iq1s[byte_at(r.qs, l) | (((qh >> (3 * l)) & 7u) << 8)];
      v[2 * l] = lo32(g);
      v[2 * l + 1] = hi32(g);
    }
    const float d = h2f(r.d) * 0.125f;
    const int ls = 2 * static_cast<int>((qh >> 12) & 7) + 1;
    const bool neg = qh & 0x8000u;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      const int sx = xq_s(xa.meta(j, 0));
      add(acc[j], d, xa, j, ls * (8 * (s.lo + s.hi) + (neg ? -sx : sx)));
    }
  }
};

struct IQ1_M {  // qs[32] qh[16] scales[8] (fp16 d in the top nibbles of the 4 u16 scales)
  static constexpr GgmlType kType = GgmlType::IQ1_M;
  static constexpr int kBlockElems = 256, kBlockBytes = 56, kParts = 8, kPartElems = 32;
  static constexpr bool kQ8K = true;
  struct Part {
    uint32_t qs, sc[2];
    uint16_t qh;
    uint8_t ib;
  };
  __host__ __device__ static void load(const uint8_t* b, int ib, Part& r) {
    r.qs = ld_u32_a2(b + 4 * ib);
    r.qh = ld_u16(b + 32 + 2 * ib);
    r.sc[0] = ld_u32_a2(b + 48);
    r.sc[1] = ld_u32_a2(b + 52);
    r.ib = static_cast<uint8_t>(ib);
  }
  template <int N>
  __host__ __device__ static void dot(const Part& r, const DevTables* T, const XQ& xa, float (&acc)[N]) {
    uint32_t v[8];
    const uint32_t qh = r.qh;
    int sgn[4];  // the sign of each 8-group's delta
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint32_t h = (qh >> (4 * l)) & 0xfu;
      const uint64_t g = T->iq1s[byte_at(r.qs, l) | ((h & 7u) << 8)];
      v[2 * l] = lo32(g);
      v[2 * l + 1] = hi32(g);
      sgn[l] = h & 8u ? -1 : 1;
    }
    const uint32_t s0 = r.sc[0] & 0xffffu, s1 = r.sc[0] >> 16, s2 = r.sc[1] & 0xffffu, s3 = r.sc[1] >> 16;
    const uint16_t dh = static_cast<uint16_t>((s0 >> 12) | ((s1 >> 8) & 0x00f0u) | ((s2 >> 4) & 0x0f00u) | (s3 & 0xf000u));
    const float d = h2f(dh) * 0.125f;
    const uint32_t sc = (r.ib / 2 == 0 ? s0 : r.ib / 2 == 1 ? s1 : r.ib / 2 == 2 ? s2 : s3) >> (6 * (r.ib % 2));
    const int ls0 = 2 * static_cast<int>(sc & 7) + 1, ls1 = 2 * static_cast<int>((sc >> 3) & 7) + 1;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const Sums2 s = dot32(v, xa, j);
      int x8[4];
      xsum8(xa, j, x8);
      const int t0 = 8 * s.lo + sgn[0] * x8[0] + sgn[1] * x8[1], t1 = 8 * s.hi + sgn[2] * x8[2] + sgn[3] * x8[3];
      add(acc[j], d, xa, j, ls0 * t0 + ls1 * t1);
    }
  }
};

}  // namespace df::cudamv::i8
