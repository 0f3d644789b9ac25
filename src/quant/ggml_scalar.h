// Scalar conversions that several formats share, with ggml's exact semantics (facts of the
// file formats and of ggml's reference quantisers). Internal linkage on purpose (see
// format.h): every translation unit, whatever its ISA flags, gets its own copy.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace df::quant::detail {

// ggml's nearest_int (ggml-quants.c): adds 1.5 * 2^23 and reads the mantissa bits, i.e.
// round to nearest even for |x| < 2^22. NaN gives 0 (its mantissa is 0x400000).
[[gnu::always_inline]] static inline int nearest_int(float x) {
  const float v = x + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(v) & 0x007fffffu) - 0x00400000;
}

// E8M0 scale (MXFP4) halved: 2^(e - 128), as ggml_e8m0_to_fp32_half (subnormal for e < 2).
[[gnu::always_inline]] static inline float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// UE4M3 scale (NVFP4) halved, as ggml_ue4m3_to_fp32: the byte 0x7f reads as 0, otherwise the
// top bit is ignored (0xff reads as 240); exponent 0 is subnormal (m * 2^-9), otherwise
// (1 + m/8) * 2^(e-7); then times 0.5. All values are exact in f32: normal ones are built
// from bits, subnormal ones m * 2^-10.
[[gnu::always_inline]] static inline float ue4m3_to_fp32_half(uint8_t x) {
  if (x == 0x7fu) return 0.0f;
  const uint32_t v = x & 0x7fu;
  if (v < 8) return static_cast<float>(v) * 0x1p-10f;
  return std::bit_cast<float>((v << 20) + (119u << 23));
}

// ggml_fp32_to_ue4m3 (NVFP4 quantiser): scale value to UE4M3 bits, saturating at 448
// (0x7e), rounding the mantissa half up, subnormals rounded as (int)(x * 512 + 0.5).
static inline uint8_t fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  int exp = static_cast<int>((bits >> 23) & 0xffu) - 127 + 7;
  const int man = static_cast<int>((bits >> 20) & 0x7u);
  if (exp <= 0) {
    int m = static_cast<int>(x * 512.0f + 0.5f);
    if (m > 7) m = 7;
    return m < 1 ? 0 : static_cast<uint8_t>(m);
  }
  if (exp >= 15) return 0x7e;
  int m = man + static_cast<int>((bits >> 19) & 1u);
  if (m > 7) {
    m = 0;
    if (++exp >= 15) return 0x7e;
  }
  return static_cast<uint8_t>((exp << 3) | m);
}

// The float -> int8 conversion of ggml's reference quantisers on x86 ((int8_t)roundf(v)):
// cvttss2si gives 0x80000000 out of range, whose low byte is 0.
static inline int8_t round_to_int8_ref(float v) {
  const float r = std::round(v);
  const bool fits = r >= -2147483648.0f && r < 2147483648.0f;
  return fits ? static_cast<int8_t>(static_cast<uint32_t>(static_cast<int32_t>(r))) : int8_t{0};
}

// cvtps2dq with the default rounding (nearest even): 0x80000000 out of range or NaN.
static inline int32_t cvtps_epi32(float v) {
  const float r = std::nearbyint(v);
  const bool fits = r >= -2147483648.0f && r < 2147483648.0f;
  return fits ? static_cast<int32_t>(r) : INT32_MIN;
}

// Signed saturation to int8 (packssdw + packsswb).
static inline int8_t sat_int8(int32_t v) {
  return static_cast<int8_t>(v < -128 ? -128 : v > 127 ? 127 : v);
}

}  // namespace df::quant::detail
