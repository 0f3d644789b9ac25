#include "quant/formats_float.h"

#include <cmath>
#include <cstring>

namespace df::quant {

// ---- F32 ----
void FormatF32::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  std::memcpy(dst, src, static_cast<size_t>(nb) * sizeof(float));
}
void FormatF32::quantize_ref(const float* src, Block* dst, int64_t nb) {
  std::memcpy(dst, src, static_cast<size_t>(nb) * sizeof(float));
}
void FormatF32::quantize_act(const float* src, Block* dst, int64_t nb) { quantize_ref(src, dst, nb); }
float FormatF32::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float s = 0.0f;
  for (int64_t i = 0; i < nb; ++i) s = std::fma(w[i], a[i], s);
  return s;
}

// ---- F16 ----
void FormatF16::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) dst[i] = fp16_to_fp32(src[i]);
}
void FormatF16::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) dst[i] = fp32_to_fp16(src[i]);
}
void FormatF16::quantize_act(const float* src, Block* dst, int64_t nb) { quantize_ref(src, dst, nb); }
float FormatF16::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float s = 0.0f;
  for (int64_t i = 0; i < nb; ++i) s = std::fma(fp16_to_fp32(w[i]), fp16_to_fp32(a[i]), s);
  return s;
}

// ---- BF16 ----
void FormatBF16::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) dst[i] = bf16_to_fp32(src[i]);
}
void FormatBF16::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) dst[i] = fp32_to_bf16(src[i]);
}
void FormatBF16::quantize_act(const float* src, Block* dst, int64_t nb) { quantize_ref(src, dst, nb); }
float FormatBF16::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  float s = 0.0f;
  for (int64_t i = 0; i < nb; ++i) s = std::fma(bf16_to_fp32(w[i]), bf16_to_fp32(a[i]), s);
  return s;
}

}  // namespace df::quant
