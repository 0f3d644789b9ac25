#include "quant/types.h"

#include <array>
#include <bit>
#include <string>

#include "common/error.h"

namespace df {
namespace {

struct Entry {
  uint32_t id;
  TypeInfo info;
};

// Geometry from ggml's type_traits (ggml.c): block element counts and block byte sizes.
constexpr std::array kTypes = {
    Entry{0, {"f32", 1, 4, true}},        Entry{1, {"f16", 1, 2, true}},
    Entry{2, {"q4_0", 32, 18, true}},     Entry{3, {"q4_1", 32, 20, true}},
    Entry{6, {"q5_0", 32, 22, true}},     Entry{7, {"q5_1", 32, 24, true}},
    Entry{8, {"q8_0", 32, 34, true}},     Entry{9, {"q8_1", 32, 36, false}},
    Entry{10, {"q2_K", 256, 84, true}},   Entry{11, {"q3_K", 256, 110, true}},
    Entry{12, {"q4_K", 256, 144, true}},  Entry{13, {"q5_K", 256, 176, true}},
    Entry{14, {"q6_K", 256, 210, true}},  Entry{15, {"q8_K", 256, 292, false}},
    Entry{16, {"iq2_xxs", 256, 66, true}}, Entry{17, {"iq2_xs", 256, 74, true}},
    Entry{18, {"iq3_xxs", 256, 98, true}}, Entry{19, {"iq1_s", 256, 50, true}},
    Entry{20, {"iq4_nl", 32, 18, true}},   Entry{21, {"iq3_s", 256, 110, true}},
    Entry{22, {"iq2_s", 256, 82, true}},   Entry{23, {"iq4_xs", 256, 136, true}},
    Entry{24, {"i8", 1, 1, false}},         Entry{25, {"i16", 1, 2, false}},
    Entry{26, {"i32", 1, 4, false}},        Entry{27, {"i64", 1, 8, false}},
    Entry{28, {"f64", 1, 8, false}},        Entry{29, {"iq1_m", 256, 56, true}},
    Entry{30, {"bf16", 1, 2, true}},        Entry{34, {"tq1_0", 256, 54, true}},
    Entry{35, {"tq2_0", 256, 66, true}},   Entry{39, {"mxfp4", 32, 17, true}},
    Entry{40, {"nvfp4", 64, 36, true}},     Entry{41, {"q1_0", 128, 18, true}},
    Entry{42, {"q2_0", 64, 18, true}},
};

}  // namespace

std::optional<TypeInfo> type_info(uint32_t id) {
  for (const auto& e : kTypes)
    if (e.id == id) return e.info;
  return std::nullopt;
}

const TypeInfo& type_info(GgmlType t) {
  for (const auto& e : kTypes)
    if (e.id == static_cast<uint32_t>(t)) return e.info;
  throw Error("unknown ggml type id " + std::to_string(static_cast<uint32_t>(t)));
}

std::string_view type_name(GgmlType t) { return type_info(t).name; }

size_t row_bytes(GgmlType t, int64_t n) {
  const auto& ti = type_info(t);
  if (n % ti.block_elems != 0)
    throw Error("row of " + std::to_string(n) + " elements is not a multiple of the " +
                std::string(ti.name) + " block size " + std::to_string(ti.block_elems));
  return static_cast<size_t>(n / ti.block_elems) * ti.block_bytes;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    // inf, or NaN: payload kept and made quiet, as F16C (vcvtph2ps) and ggml's
    // ggml_compute_fp16_to_fp32 (an f32 multiply) do
    bits = sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x400000u : 0u);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  // Round to nearest even, bit for bit as the F16C instruction vcvtps2ph (checked for all
  // 2^32 inputs). ggml's portable ggml_compute_fp32_to_fp16 agrees except that it turns
  // every NaN into 0x7e00; F16C keeps the top payload bits and sets the quiet bit.
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u)  // NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) ... gives mantissa aligned to 2^-24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent (127 -> 15)
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace df
