#include "quant/formats_q8k.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace df::quant {
namespace {

// ggml's nearest_int: round to nearest even by adding 1.5 * 2^23 (valid for |v| < 2^22).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

}  // namespace

void FormatQ8_K::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b)
    for (int j = 0; j < kQK_K; ++j) dst[b * kQK_K + j] = src[b].d * static_cast<float>(src[b].qs[j]);
}

void FormatQ8_K::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* x = src + b * kQK_K;
    Block& y = dst[b];
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      y.d = 0.0f;
      std::memset(y.qs, 0, sizeof y.qs);
      std::memset(y.bsums, 0, sizeof y.bsums);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y.qs[16 * g + j];
      y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = 1.0f / iscale;
  }
}

void FormatQ8_K::quantize_act(const float* src, Block* dst, int64_t nb) { quantize_ref(src, dst, nb); }

}  // namespace df::quant
