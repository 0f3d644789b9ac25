// Random, well-formed weight rows for the formats without a reference quantiser (IQ types)
// and for stress-testing the others: every byte random (all grid indices, sign codes,
// sub-block scales, stray TQ2_0 codes), then each block's fp16 scale set to a finite value
// so that products stay finite.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "quant/types.h"

namespace df::test {

// Where a format keeps its fp16 block scale: byte offset, or -1 for IQ1_M (whose scale is
// spread over the top nibbles of the four 16-bit words at byte 48), -2 for none known.
inline int scale_offset(GgmlType t) {
  switch (t) {
    case GgmlType::TQ1_0: return 52;
    case GgmlType::TQ2_0: return 64;
    case GgmlType::IQ1_M: return -1;
    case GgmlType::IQ2_XXS: case GgmlType::IQ2_XS: case GgmlType::IQ2_S: case GgmlType::IQ3_XXS:
    case GgmlType::IQ3_S: case GgmlType::IQ1_S: case GgmlType::IQ4_NL: case GgmlType::IQ4_XS:
    case GgmlType::Q1_0: case GgmlType::Q2_0: case GgmlType::Q8_0: return 0;
    default: return -2;
  }
}

// rows x k elements of type t (k a multiple of the block size), scales in +-[2^-8, 2^-4).
inline std::vector<uint8_t> random_rows(GgmlType t, int64_t rows, int64_t k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto& ti = type_info(t);
  const int64_t nb = rows * (k / ti.block_elems);
  std::vector<uint8_t> out(static_cast<size_t>(nb) * ti.block_bytes);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> mag(0.00390625f, 0.0625f);
  const int off = scale_offset(t);
  for (int64_t b = 0; b < nb && off != -2; ++b) {
    uint8_t* p = out.data() + b * ti.block_bytes;
    const uint16_t h = fp32_to_fp16(rng() & 1 ? mag(rng) : -mag(rng));
    if (off >= 0) {
      std::memcpy(p + off, &h, 2);
    } else {  // IQ1_M
      uint16_t sc[4];
      std::memcpy(sc, p + 48, 8);
      for (int i = 0; i < 4; ++i)
        sc[i] = static_cast<uint16_t>((sc[i] & 0x0fff) | (((h >> (4 * i)) & 0xf) << 12));
      std::memcpy(p + 48, sc, 8);
    }
  }
  return out;
}

// The weight formats added with the IQ / ternary / 1-2 bit families.
inline constexpr GgmlType kLowBitTypes[] = {
    GgmlType::IQ1_S, GgmlType::IQ1_M, GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
    GgmlType::IQ3_XXS, GgmlType::IQ3_S, GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::TQ1_0,
    GgmlType::TQ2_0, GgmlType::Q1_0, GgmlType::Q2_0};

}  // namespace df::test
