// Device dequantizers over raw ggml blocks (the GGUF bytes, rows padded to 16 bytes):
// IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0, Q2_K, Q3_K (the formats without a
// planar layout, dev_fast.cuh). Each format is a struct:
//   kBlockElems, kBlockBytes: one ggml block;
//   kParts, kPartElems: a block is split into kParts parts of consecutive elements, the
//     unit of work of one lane;
//   dequant(block, part, tables, w): the part's values, bit-exact with src/quant's
//     dequantize_ref (the same f32 operations; __fmul_rn where a product feeds an add, so
//     the compiler cannot contract it into an FMA).
#pragma once
#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cudamv {

struct RawIQ4_NL {
  static constexpr GgmlType kType = GgmlType::IQ4_NL;
  static constexpr int kBlockElems = 32, kBlockBytes = 18, kParts = 1, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b[2 + j];
      w[j] = d * i2f(T->iq4nl[q & 0xf]);
      w[j + 16] = d * i2f(T->iq4nl[q >> 4]);
    }
  }
};

__device__ __forceinline__ int fp4_value(int q) {
  // kValuesFp4 = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
  constexpr uint64_t kMag = 0x0c08060403020100ull;
  const int m = static_cast<int>((kMag >> (8 * (q & 7))) & 0xff);
  return q & 8 ? -m : m;
}

struct RawMxfp4 {
  static constexpr GgmlType kType = GgmlType::MXFP4;
  static constexpr int kBlockElems = 32, kBlockBytes = 17, kParts = 1, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int, const DevTables*, float (&w)[32]) {
    const float d = e8m0_half(b[0]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b[1 + j];
      w[j] = i2f(fp4_value(q & 0xf)) * d;
      w[j + 16] = i2f(fp4_value(q >> 4)) * d;
    }
  }
};

struct RawNvfp4 {
  static constexpr GgmlType kType = GgmlType::NVFP4;
  static constexpr int kBlockElems = 64, kBlockBytes = 36, kParts = 4, kPartElems = 16;
  __device__ static void dequant(const uint8_t* b, int s, const DevTables*, float (&w)[16]) {
    const float d = ue4m3_half(b[s]);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint8_t q = b[4 + 8 * s + j];
      w[j] = i2f(fp4_value(q & 0xf)) * d;
      w[j + 8] = i2f(fp4_value(q >> 4)) * d;
    }
  }
};

struct RawQ1_0 {
  static constexpr GgmlType kType = GgmlType::Q1_0;
  static constexpr int kBlockElems = 128, kBlockBytes = 18, kParts = 4, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b)), neg_d = -d;
    const uint32_t bits = ld_u32_a2(b + 2 + 4 * p);
#pragma unroll
    for (int j = 0; j < 32; ++j) w[j] = (bits >> j) & 1u ? d : neg_d;
  }
};

struct RawQ2_0 {
  static constexpr GgmlType kType = GgmlType::Q2_0;
  static constexpr int kBlockElems = 64, kBlockBytes = 18, kParts = 2, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint32_t lo = ld_u32_a2(b + 2 + 8 * p), hi = ld_u32_a2(b + 6 + 8 * p);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const uint32_t v = j < 16 ? lo : hi;
      w[j] = i2f(static_cast<int>((v >> (2 * (j % 16))) & 3u) - 1) * d;
    }
  }
};

// ---- K-quants: 256-element super-blocks, parts of 32 elements (part p = elements 32p..) ----

__device__ __forceinline__ void scale_min_k4(const uint8_t* q, int j, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

struct RawQ2_K {  // scales[16] qs[64] d dmin
  static constexpr GgmlType kType = GgmlType::Q2_K;
  static constexpr int kBlockElems = 256, kBlockBytes = 84, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b + 80)), dmin = h2f(ld_u16(b + 82));
    const int c = p / 4, j = p % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t s = b[2 * p + h];
      const float dl = d * i2f(s & 0xf), ml = dmin * i2f(s >> 4);
#pragma unroll
      for (int l = 0; l < 16; l += 2) {
        const uint16_t v = ld_u16(b + 16 + 32 * c + 16 * h + l);
        w[16 * h + l] = __fmul_rn(dl, i2f((v >> (2 * j)) & 3)) - ml;
        w[16 * h + l + 1] = __fmul_rn(dl, i2f((v >> (8 + 2 * j)) & 3)) - ml;
      }
    }
  }
};

struct RawQ3_K {  // hmask[32] qs[64] scales[12] d
  static constexpr GgmlType kType = GgmlType::Q3_K;
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b + 108));
    const uint8_t* scales = b + 96;
    const int c = p / 4, j = p % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * p + h;
      const int lo = s < 8 ? scales[s] & 0xf : scales[s - 8] >> 4;
      const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
      const float dl = d * i2f((lo | (hi << 4)) - 32);
#pragma unroll
      for (int l = 0; l < 16; l += 2) {
        const int e = 16 * h + l;
        const uint16_t v = ld_u16(b + 32 + 32 * c + e);
        const uint16_t hm = ld_u16(b + e);
        const int sh = 4 * c + j;
        const int q0 = static_cast<int>((v >> (2 * j)) & 3) - (((hm >> sh) & 1) ? 0 : 4);
        const int q1 = static_cast<int>((v >> (8 + 2 * j)) & 3) - (((hm >> (8 + sh)) & 1) ? 0 : 4);
        w[e] = dl * i2f(q0);
        w[e + 1] = dl * i2f(q1);
      }
    }
  }
};

}  // namespace df::cudamv
