// Device dequantizers over raw ggml blocks: the IQ formats but IQ4_XS (grids in DevTables)
// and the ternary TQ1_0 / TQ2_0. Same contract as dev_raw_basic.cuh; 256-element blocks in 8 parts
// of 32 elements (part ib = elements 32 ib .. 32 ib + 31), bit-exact with src/quant's
// dequantize_ref (formats_iq.cpp, formats_ternary.cpp).
#pragma once
#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cudamv {

__device__ __forceinline__ float sign_of(unsigned signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; }

struct RawIQ2_XXS {  // d qs[u16 x 32]
  static constexpr GgmlType kType = GgmlType::IQ2_XXS;
  static constexpr int kBlockElems = 256, kBlockBytes = 66, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint32_t grid_idx = ld_u32_a2(b + 2 + 8 * ib), aux = ld_u32_a2(b + 6 + 8 * ib);
    const float db = d * (0.5f + i2f(static_cast<int>(aux >> 28))) * 0.25f;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = T->iq2xxs[(grid_idx >> (8 * l)) & 0xff];
      const unsigned signs = T->signs[(aux >> (7 * l)) & 127];
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * l + j] = db * i2f(byte_of(g, j)) * sign_of(signs, j);
    }
  }
};

struct RawIQ2_XS {  // d qs[u16 x 32] scales[8]
  static constexpr GgmlType kType = GgmlType::IQ2_XS;
  static constexpr int kBlockElems = 256, kBlockBytes = 74, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint8_t s = b[66 + ib];
    const float db[2] = {d * (0.5f + i2f(s & 0xf)) * 0.25f, d * (0.5f + i2f(s >> 4)) * 0.25f};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = ld_u16(b + 2 + 2 * (4 * ib + l));
      const uint64_t g = T->iq2xs[q & 511];
      const unsigned signs = T->signs[q >> 9];
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * l + j] = db[l / 2] * i2f(byte_of(g, j)) * sign_of(signs, j);
    }
  }
};

struct RawIQ2_S {  // d qs[64] qh[8] scales[8]
  static constexpr GgmlType kType = GgmlType::IQ2_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 82, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint8_t* qs = b + 2;
    const uint8_t s = b[74 + ib], qh = b[66 + ib];
    const float db[2] = {d * (0.5f + i2f(s & 0xf)) * 0.25f, d * (0.5f + i2f(s >> 4)) * 0.25f};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = T->iq2s[qs[4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300)];
      const unsigned signs = qs[32 + 4 * ib + l];
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * l + j] = db[l / 2] * i2f(byte_of(g, j)) * sign_of(signs, j);
    }
  }
};

struct RawIQ3_XXS {  // d qs[96]
  static constexpr GgmlType kType = GgmlType::IQ3_XXS;
  static constexpr int kBlockElems = 256, kBlockBytes = 98, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint8_t* qs = b + 2;
    const uint32_t aux = ld_u32_a2(qs + 64 + 4 * ib);
    const float db = d * (0.5f + i2f(static_cast<int>(aux >> 28))) * 0.5f;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = T->signs[(aux >> (7 * l)) & 127];
      const uint32_t g1 = T->iq3xxs[qs[8 * ib + 2 * l]], g2 = T->iq3xxs[qs[8 * ib + 2 * l + 1]];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[8 * l + j] = db * i2f(byte_of(g1, j)) * sign_of(signs, j);
        w[8 * l + j + 4] = db * i2f(byte_of(g2, j)) * sign_of(signs, j + 4);
      }
    }
  }
};

struct RawIQ3_S {  // d qs[64] qh[8] signs[32] scales[4]
  static constexpr GgmlType kType = GgmlType::IQ3_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 110, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const uint8_t* qs = b + 2;
    const uint8_t qh = b[66 + ib];
    const uint8_t sc = b[106 + ib / 2];
    const int ls = ib % 2 == 0 ? sc & 0xf : sc >> 4;
    const float db = d * i2f(1 + 2 * ls);
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const unsigned s = b[74 + 4 * ib + l];
      const uint32_t g1 = T->iq3s[qs[8 * ib + 2 * l] | ((qh << (8 - 2 * l)) & 256)];
      const uint32_t g2 = T->iq3s[qs[8 * ib + 2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[8 * l + j] = db * i2f(byte_of(g1, j)) * sign_of(s, j);
        w[8 * l + j + 4] = db * i2f(byte_of(g2, j)) * sign_of(s, j + 4);
      }
    }
  }
};

constexpr float kIq1Delta = 0.125f;

struct RawIQ1_S {  // d qs[32] qh[u16 x 8]
  static constexpr GgmlType kType = GgmlType::IQ1_S;
  static constexpr int kBlockElems = 256, kBlockBytes = 50, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const float d = h2f(ld_u16(b));
    const unsigned qh = ld_u16(b + 34 + 2 * ib);
    const float dl = d * i2f(static_cast<int>(2 * ((qh >> 12) & 7) + 1));
    const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = T->iq1s[b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * l + j] = dl * (i2f(static_cast<int8_t>(byte_of(g, j))) + delta);
    }
  }
};

struct RawIQ1_M {  // qs[32] qh[16] scales[8] (fp16 d in the top nibbles)
  static constexpr GgmlType kType = GgmlType::IQ1_M;
  static constexpr int kBlockElems = 256, kBlockBytes = 56, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int ib, const DevTables* T, float (&w)[32]) {
    const uint16_t sc0 = ld_u16(b + 48), sc1 = ld_u16(b + 50), sc2 = ld_u16(b + 52), sc3 = ld_u16(b + 54);
    const uint16_t h = static_cast<uint16_t>((sc0 >> 12) | ((sc1 >> 8) & 0x00f0) | ((sc2 >> 4) & 0x0f00) | (sc3 & 0xf000));
    const float d = h2f(h);
    const uint16_t sc = ld_u16(b + 48 + 2 * (ib / 2));
    const float dl[2] = {d * i2f(static_cast<int>(2 * ((sc >> (6 * (ib % 2))) & 7) + 1)),
                         d * i2f(static_cast<int>(2 * ((sc >> (6 * (ib % 2) + 3)) & 7) + 1))};
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const unsigned qh = b[32 + 2 * ib + l / 2] >> (4 * (l % 2));
      const uint64_t g = T->iq1s[b[4 * ib + l] | ((qh & 7) << 8)];
      const float delta = qh & 8 ? -kIq1Delta : kIq1Delta;
#pragma unroll
      for (int j = 0; j < 8; ++j) w[8 * l + j] = dl[l / 2] * (i2f(static_cast<int8_t>(byte_of(g, j))) + delta);
    }
  }
};

// Trit n of a TQ1_0 byte: (byte * 3^n mod 256) * 3 / 256.
__device__ __forceinline__ int tq1_trit(uint8_t byte, int n) {
  constexpr uint32_t kPow3 = 1u | (3u << 8) | (9u << 16) | (27u << 24);
  const uint32_t p = n < 4 ? (kPow3 >> (8 * n)) & 0xff : 81u;
  return static_cast<int>(((static_cast<uint32_t>(byte) * p) & 0xff) * 3u >> 8);
}

struct RawTQ1_0 {  // qs[48] qh[4] d
  static constexpr GgmlType kType = GgmlType::TQ1_0;
  static constexpr int kBlockElems = 256, kBlockBytes = 54, kParts = 8, kPartElems = 32;
  // Element e = 32 p + l (src/quant's order): parts 0..4 are trit p of qs[l]; parts 5, 6 trit
  // 2 (p - 5) + l / 16 of qs[32 + l % 16]; part 7 trit 4 of qs[32 + l] (l < 16), then trit
  // (l - 16) / 4 of qh[(l - 16) % 4]. Each branch's byte indices are fixed at compile time and
  // read two at a time (blocks are 2-byte aligned); the trit index is uniform across lanes.
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b + 52));
    auto trit = [d](uint32_t byte, int n) { return i2f(tq1_trit(static_cast<uint8_t>(byte), n) - 1) * d; };
    if (p < 5) {
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const uint32_t v = ld_u16(b + 2 * k);
        w[2 * k] = trit(v & 0xffu, p);
        w[2 * k + 1] = trit(v >> 8, p);
      }
    } else if (p < 7) {
      const int n0 = 2 * (p - 5);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const uint32_t v = ld_u16(b + 32 + 2 * k);
        w[2 * k] = trit(v & 0xffu, n0);
        w[2 * k + 1] = trit(v >> 8, n0);
        w[16 + 2 * k] = trit(v & 0xffu, n0 + 1);
        w[16 + 2 * k + 1] = trit(v >> 8, n0 + 1);
      }
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const uint32_t v = ld_u16(b + 32 + 2 * k);
        w[2 * k] = trit(v & 0xffu, 4);
        w[2 * k + 1] = trit(v >> 8, 4);
      }
      const uint32_t h = ld_u16(b + 48) | (static_cast<uint32_t>(ld_u16(b + 50)) << 16);
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int j = 0; j < 4; ++j) w[16 + 4 * n + j] = trit((h >> (8 * j)) & 0xffu, n);
    }
  }
};

struct RawTQ2_0 {  // qs[64] d
  static constexpr GgmlType kType = GgmlType::TQ2_0;
  static constexpr int kBlockElems = 256, kBlockBytes = 66, kParts = 8, kPartElems = 32;
  __device__ static void dequant(const uint8_t* b, int p, const DevTables*, float (&w)[32]) {
    const float d = h2f(ld_u16(b + 64));
    const int j0 = 32 * (p / 4), shift = 2 * (p % 4);
#pragma unroll
    for (int m = 0; m < 32; m += 2) {
      const uint16_t v = ld_u16(b + j0 + m);
      w[m] = i2f(static_cast<int>((v >> shift) & 3) - 1) * d;
      w[m + 1] = i2f(static_cast<int>((v >> (8 + shift)) & 3) - 1) * d;
    }
  }
};

}  // namespace df::cudamv
