// The block structs of every ggml type this build computes with, and their geometry, in one
// place (facts of the file format: ggml-common.h). Shared by the CPU formats (formats_*.h),
// the CPU kernels and the CUDA kernels, so this header includes only <cstdint> and holds
// plain structs: nvcc includes it from .cu files.
// The meaning of each field and the element order of each format are described beside the
// format's reference code (formats_*.h).
#pragma once
#include <cstdint>

namespace df {

// ---- elements per block ----
constexpr int kQK8_0 = 32;      // Q8_0
constexpr int kQK8_1 = 32;      // Q8_1
constexpr int kQK4 = 32;        // Q4_0, Q4_1, Q5_0, Q5_1
constexpr int kQK_K = 256;      // K-quants, Q8_K, IQ (but IQ4_NL), TQ1_0, TQ2_0
constexpr int kKScaleSize = 12; // packed 6-bit scales and mins of Q4_K / Q5_K
constexpr int kQK4_NL = 32;     // IQ4_NL
constexpr int kQKMxfp4 = 32;    // MXFP4
constexpr int kQKNvfp4 = 64;    // NVFP4
constexpr int kQKNvfp4Sub = 16; // NVFP4 elements per scale
constexpr int kQK1_0 = 128;     // Q1_0
constexpr int kQK2_0 = 64;      // Q2_0

// ---- 8-bit (weights and activations) ----
struct BlockQ8_0 {
  uint16_t d;            // fp16 scale
  int8_t qs[kQK8_0];     // quants
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ8_1 {
  uint16_t d;          // fp16 scale
  uint16_t s;          // fp16 d * sum(qs)
  int8_t qs[kQK8_1];   // quants
};
static_assert(sizeof(BlockQ8_1) == 36);

struct BlockQ8_K {
  float d;                     // scale
  int8_t qs[kQK_K];            // quants
  int16_t bsums[kQK_K / 16];   // sum of each 16 quants
};
static_assert(sizeof(BlockQ8_K) == 292);

// ---- legacy 32-element formats ----
struct BlockQ4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[kQK4 / 2];   // nibbles
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_1 {
  uint16_t d;             // fp16 scale
  uint16_t m;             // fp16 min
  uint8_t qs[kQK4 / 2];   // nibbles
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;             // fp16 scale
  uint8_t qh[4];          // fifth bits
  uint8_t qs[kQK4 / 2];   // low nibbles
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;             // fp16 scale
  uint16_t m;             // fp16 min
  uint8_t qh[4];          // fifth bits
  uint8_t qs[kQK4 / 2];   // low nibbles
};
static_assert(sizeof(BlockQ5_1) == 24);

// ---- K-quants (256-element super-blocks) ----
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d;                  // fp16 scale of the scales
  uint16_t dmin;               // fp16 scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];    // high bits
  uint8_t qs[kQK_K / 4];       // low 2 bits
  uint8_t scales[12];          // 16 6-bit scales
  uint16_t d;                  // fp16 super-block scale
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  uint16_t d;                  // fp16 scale of the scales
  uint16_t dmin;               // fp16 scale of the mins
  uint8_t scales[kKScaleSize]; // 8 6-bit scales and 8 6-bit mins
  uint8_t qs[kQK_K / 2];       // nibbles
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];       // fifth bits
  uint8_t qs[kQK_K / 2];       // low nibbles
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low 4 bits
  uint8_t qh[kQK_K / 4];       // high 2 bits
  int8_t scales[kQK_K / 16];   // scales
  uint16_t d;                  // fp16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

// ---- i-quants ----
struct BlockIQ2_XXS {
  uint16_t d;                  // fp16 scale
  uint16_t qs[kQK_K / 8];      // per 32 elements: 4 grid bytes, then 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIQ2_XXS) == 66);

struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[kQK_K / 8];      // per 8 elements: 9-bit grid index | 7-bit sign code << 9
  uint8_t scales[kQK_K / 32];  // two 4-bit scales per 32 elements (one per 16)
};
static_assert(sizeof(BlockIQ2_XS) == 74);

struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];       // [0, 32): grid index low bytes; [32, 64): sign bytes
  uint8_t qh[kQK_K / 32];      // grid index bits 8-9, 2 per 8 elements
  uint8_t scales[kQK_K / 32];  // two 4-bit scales per 32 elements
};
static_assert(sizeof(BlockIQ2_S) == 82);

struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];   // [0, 64): grid indices (4 elements each);
                               // [64, 96): per 32 elements 4 x 7-bit sign codes + 4-bit scale
};
static_assert(sizeof(BlockIQ3_XXS) == 98);

struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];       // grid index low bytes (4 elements each)
  uint8_t qh[kQK_K / 32];      // grid index bit 8
  uint8_t signs[kQK_K / 8];    // one sign bit per element
  uint8_t scales[kQK_K / 64];  // two 4-bit scales per 64 elements
};
static_assert(sizeof(BlockIQ3_S) == 110);

struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];       // grid index low bytes (8 elements each)
  uint16_t qh[kQK_K / 32];     // per 32 elements: 4 x 3 index bits, 3-bit scale, delta sign
};
static_assert(sizeof(BlockIQ1_S) == 50);

struct BlockIQ1_M {
  uint8_t qs[kQK_K / 8];       // grid index low bytes
  uint8_t qh[kQK_K / 16];      // per 8 elements: 3 index bits + delta sign (a nibble)
  uint8_t scales[kQK_K / 32];  // 3-bit scales per 16 elements; the fp16 block scale is
                               // spread over the top nibble of each 16-bit word
};
static_assert(sizeof(BlockIQ1_M) == 56);

struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK4_NL / 2];     // element j: low nibble of qs[j], element j+16: high nibble
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;           // bits 4-5 of the 6-bit scales, 2 per 32 elements
  uint8_t scales_l[kQK_K / 64];  // bits 0-3 of the scales, a nibble per 32 elements
  uint8_t qs[kQK_K / 2];       // per 32 elements as IQ4_NL
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// ---- 4-bit floats ----
struct BlockMxfp4 {
  uint8_t e;                   // E8M0 scale
  uint8_t qs[kQKMxfp4 / 2];    // E2M1 nibbles
};
static_assert(sizeof(BlockMxfp4) == 17);

struct BlockNvfp4 {
  uint8_t d[kQKNvfp4 / kQKNvfp4Sub];  // UE4M3 scales, one per 16 elements
  uint8_t qs[kQKNvfp4 / 2];           // E2M1 nibbles
};
static_assert(sizeof(BlockNvfp4) == 36);

// ---- ternary ----
struct BlockTQ1_0 {
  uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];  // 48 bytes: 5 trits each (240 elements)
  uint8_t qh[kQK_K / 64];                    // 4 bytes: 4 trits each (16 elements)
  uint16_t d;                                // fp16 scale
};
static_assert(sizeof(BlockTQ1_0) == 54);

struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];  // 2 bits per element
  uint16_t d;             // fp16 scale
};
static_assert(sizeof(BlockTQ2_0) == 66);

// ---- 1- and 2-bit with one scale ----
struct BlockQ1_0 {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK1_0 / 8];   // sign bits
};
static_assert(sizeof(BlockQ1_0) == 18);

struct BlockQ2_0 {
  uint16_t d;               // fp16 scale
  uint8_t qs[kQK2_0 / 4];   // 2 bits per element
};
static_assert(sizeof(BlockQ2_0) == 18);

}  // namespace df
