#include "quant/formats_iq.h"

#include <cmath>
#include <cstring>

#include "quant/iq_tables.h"
#include "quant/ggml_lanes.h"

namespace df::quant {
namespace {

// The signed int8 values of one 256-element block of a Q8_K-activation IQ format as its
// dot products use them (grid magnitude times sign; IQ1: grid value in {-1, 0, 1};
// IQ4_XS: table value), each 16-element group's integer scale, and for IQ1_S / IQ1_M
// the sign (+-1) of each 8-element group's grid shift (0 for the other formats).
struct IqDecoded {
  int8_t q[kQK_K];
  int16_t scale[kQK_K / 16];
  int8_t delta_sign[kQK_K / 8];
};

constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA == IQ1M_DELTA

int grid_byte(uint64_t g, int j) { return static_cast<int>((g >> (8 * j)) & 0xff); }
int grid_byte(uint32_t g, int j) { return static_cast<int>((g >> (8 * j)) & 0xff); }
int grid_value_iq1(uint64_t g, int j) { return static_cast<int8_t>((g >> (8 * j)) & 0xff); }

// ggml's (signs & kmask_iq2xs[j] ? -1.f : 1.f): a multiplication, which keeps NaN signs.
float sign_of(unsigned signs, int j) { return (signs >> j) & 1 ? -1.0f : 1.0f; }

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- per-format decoding into signed values and 16-element scales ----

void decode(const BlockIQ2_XXS& b, IqDecoded& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t grid_idx = load_u32(b.qs + 4 * ib), signs_scale = load_u32(b.qs + 4 * ib + 2);
    const int16_t s = static_cast<int16_t>(2 * (signs_scale >> 28) + 1);
    o.scale[2 * ib] = o.scale[2 * ib + 1] = s;
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = kIq2xxsGrid[(grid_idx >> (8 * l)) & 0xff];
      const unsigned signs = kIq2xsSigns[(signs_scale >> (7 * l)) & 127];
      for (int j = 0; j < 8; ++j)
        o.q[32 * ib + 8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -grid_byte(g, j) : grid_byte(g, j));
    }
  }
}

void decode(const BlockIQ2_XS& b, IqDecoded& o) {
  for (int ib = 0; ib < 8; ++ib) {
    o.scale[2 * ib] = static_cast<int16_t>(2 * (b.scales[ib] & 0xf) + 1);
    o.scale[2 * ib + 1] = static_cast<int16_t>(2 * (b.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = b.qs[4 * ib + l];
      const uint64_t g = kIq2xsGrid[q & 511];
      const unsigned signs = kIq2xsSigns[q >> 9];
      for (int j = 0; j < 8; ++j)
        o.q[32 * ib + 8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -grid_byte(g, j) : grid_byte(g, j));
    }
  }
}

void decode(const BlockIQ2_S& b, IqDecoded& o) {
  const uint8_t* signs = b.qs + kQK_K / 8;
  for (int ib = 0; ib < 8; ++ib) {
    o.scale[2 * ib] = static_cast<int16_t>(2 * (b.scales[ib] & 0xf) + 1);
    o.scale[2 * ib + 1] = static_cast<int16_t>(2 * (b.scales[ib] >> 4) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = kIq2sGrid[b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300)];
      const unsigned s = signs[4 * ib + l];
      for (int j = 0; j < 8; ++j)
        o.q[32 * ib + 8 * l + j] = static_cast<int8_t>((s >> j) & 1 ? -grid_byte(g, j) : grid_byte(g, j));
    }
  }
}

void decode(const BlockIQ3_XXS& b, IqDecoded& o) {
  const uint8_t* scales_and_signs = b.qs + kQK_K / 4;
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = load_u32(scales_and_signs + 4 * ib);
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int16_t>(2 * (aux >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      const unsigned signs = kIq2xsSigns[(aux >> (7 * l)) & 127];
      for (int h = 0; h < 2; ++h) {
        const uint32_t g = kIq3xxsGrid[b.qs[8 * ib + 2 * l + h]];
        for (int j = 0; j < 4; ++j) {
          const int e = 4 * h + j;
          o.q[32 * ib + 8 * l + e] = static_cast<int8_t>((signs >> e) & 1 ? -grid_byte(g, j) : grid_byte(g, j));
        }
      }
    }
  }
}

void decode(const BlockIQ3_S& b, IqDecoded& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ib % 2 == 0 ? b.scales[ib / 2] & 0xf : b.scales[ib / 2] >> 4;
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int16_t>(2 * ls + 1);
    for (int l = 0; l < 4; ++l) {
      const unsigned s = b.signs[4 * ib + l];
      for (int h = 0; h < 2; ++h) {
        const int idx = b.qs[8 * ib + 2 * l + h] | ((b.qh[ib] << (8 - 2 * l - h)) & 256);
        const uint32_t g = kIq3sGrid[idx];
        for (int j = 0; j < 4; ++j) {
          const int e = 4 * h + j;
          o.q[32 * ib + 8 * l + e] = static_cast<int8_t>((s >> e) & 1 ? -grid_byte(g, j) : grid_byte(g, j));
        }
      }
    }
  }
}

void decode(const BlockIQ1_S& b, IqDecoded& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned qh = b.qh[ib];
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int16_t>(2 * ((qh >> 12) & 7) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint64_t g = kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
      for (int j = 0; j < 8; ++j) o.q[32 * ib + 8 * l + j] = static_cast<int8_t>(grid_value_iq1(g, j));
      o.delta_sign[4 * ib + l] = qh & 0x8000 ? -1 : 1;
    }
  }
}

void decode(const BlockIQ1_M& b, IqDecoded& o) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  for (int ib = 0; ib < 8; ++ib) {
    o.scale[2 * ib] = static_cast<int16_t>(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
    o.scale[2 * ib + 1] = static_cast<int16_t>(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
    for (int l = 0; l < 4; ++l) {
      const unsigned qh = b.qh[2 * ib + l / 2] >> (4 * (l % 2));  // this group's nibble
      const uint64_t g = kIq1sGrid[b.qs[4 * ib + l] | ((qh & 7) << 8)];
      for (int j = 0; j < 8; ++j) o.q[32 * ib + 8 * l + j] = static_cast<int8_t>(grid_value_iq1(g, j));
      o.delta_sign[4 * ib + l] = qh & 8 ? -1 : 1;
    }
  }
}

void decode(const BlockIQ4_XS& b, IqDecoded& o) {
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    o.scale[2 * ib] = o.scale[2 * ib + 1] = static_cast<int16_t>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      o.q[32 * ib + j] = kIq4nlValues[b.qs[16 * ib + j] & 0xf];
      o.q[32 * ib + j + 16] = kIq4nlValues[b.qs[16 * ib + j] >> 4];
    }
  }
}

// Final f32 multiplier of each format's block sums (the scale encoding's fixed factor).
template <GgmlType T>
constexpr float kSumScale = T == GgmlType::IQ2_XXS || T == GgmlType::IQ2_XS || T == GgmlType::IQ2_S ? 0.125f
                            : T == GgmlType::IQ3_XXS                                               ? 0.25f
                                                                                                   : 1.0f;

template <class B>
float block_weight_scale(const B& b) {
  return fp16_to_fp32(b.d);
}
float block_weight_scale(const BlockIQ1_M& b) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const uint16_t h = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                           (sc[3] & 0xf000));
  return fp16_to_fp32(h);
}

template <class B>
void iq_decode(const B& b, IqDecoded& out) {
  std::memset(out.delta_sign, 0, sizeof out.delta_sign);
  decode(b, out);
}

}  // namespace

namespace {

// ---- dequantisation (ggml's dequantize_row_*, operation for operation) ----

void dequant(const BlockIQ2_XXS* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t grid_idx = load_u32(src[i].qs + 4 * ib), aux = load_u32(src[i].qs + 4 * ib + 2);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = kIq2xxsGrid[(grid_idx >> (8 * l)) & 0xff];
        const unsigned signs = kIq2xsSigns[(aux >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) y[j] = db * static_cast<float>(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dequant(const BlockIQ2_XS* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(src[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(src[i].scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(src[i].scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = src[i].qs[4 * ib + l];
        const uint64_t g = kIq2xsGrid[q & 511];
        const unsigned signs = kIq2xsSigns[q >> 9];
        for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * static_cast<float>(grid_byte(g, j)) * sign_of(signs, j);
      }
    }
  }
}

void dequant(const BlockIQ2_S* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    const float d = fp16_to_fp32(b.d);
    const uint8_t* signs = b.qs + kQK_K / 8;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + static_cast<float>(b.scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + static_cast<float>(b.scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = kIq2sGrid[b.qs[4 * ib + l] | ((b.qh[ib] << (8 - 2 * l)) & 0x300)];
        for (int j = 0; j < 8; ++j)
          y[j] = db[l / 2] * static_cast<float>(grid_byte(g, j)) * sign_of(signs[4 * ib + l], j);
      }
    }
  }
}

void dequant(const BlockIQ3_XXS* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = load_u32(b.qs + kQK_K / 4 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned signs = kIq2xsSigns[(aux >> (7 * l)) & 127];
        const uint32_t g1 = kIq3xxsGrid[b.qs[8 * ib + 2 * l]], g2 = kIq3xxsGrid[b.qs[8 * ib + 2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * static_cast<float>(grid_byte(g1, j)) * sign_of(signs, j);
          y[j + 4] = db * static_cast<float>(grid_byte(g2, j)) * sign_of(signs, j + 4);
        }
      }
    }
  }
}

void dequant(const BlockIQ3_S* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const int ls = ib % 2 == 0 ? b.scales[ib / 2] & 0xf : b.scales[ib / 2] >> 4;
      const float db = d * static_cast<float>(1 + 2 * ls);
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned s = b.signs[4 * ib + l];
        const uint32_t g1 = kIq3sGrid[b.qs[8 * ib + 2 * l] | ((b.qh[ib] << (8 - 2 * l)) & 256)];
        const uint32_t g2 = kIq3sGrid[b.qs[8 * ib + 2 * l + 1] | ((b.qh[ib] << (7 - 2 * l)) & 256)];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * static_cast<float>(grid_byte(g1, j)) * sign_of(s, j);
          y[j + 4] = db * static_cast<float>(grid_byte(g2, j)) * sign_of(s, j + 4);
        }
      }
    }
  }
}

void dequant(const BlockIQ1_S* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = b.qh[ib];
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = kIq1sGrid[b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(grid_value_iq1(g, j)) + delta);
      }
    }
  }
}

void dequant(const BlockIQ1_M* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    const float d = block_weight_scale(b);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const unsigned qh = b.qh[2 * ib + l / 2] >> (4 * (l % 2));
        const uint64_t g = kIq1sGrid[b.qs[4 * ib + l] | ((qh & 7) << 8)];
        const float delta = qh & 8 ? -kIq1Delta : kIq1Delta;
        for (int j = 0; j < 8; ++j) y[j] = dl[l / 2] * (static_cast<float>(grid_value_iq1(g, j)) + delta);
      }
    }
  }
}

void dequant(const BlockIQ4_XS* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const auto& b = src[i];
    const float d = fp16_to_fp32(b.d);
    for (int ib = 0; ib < 8; ++ib, y += 32) {
      const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * static_cast<float>(kIq4nlValues[b.qs[16 * ib + j] & 0xf]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[b.qs[16 * ib + j] >> 4]);
      }
    }
  }
}

}  // namespace

template <GgmlType T, class B>
void FormatIqK<T, B>::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  dequant(src, dst, nb);
}

void FormatIQ4_NL::dequantize_ref(const Block* src, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK4_NL) {
    const float d = fp16_to_fp32(src[i].d);
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[src[i].qs[j] & 0xf]);
      y[j + kQK4_NL / 2] = d * static_cast<float>(kIq4nlValues[src[i].qs[j] >> 4]);
    }
  }
}

// ---- reference dot products ----

// In ggml's AVX2 order (ggml_lanes.h): per block, the exact int32 lane sums (lane l of
// each 32-element sub-block: elements 4l .. 4l+3, times their 16-element group's scale)
// scaled by d = fp16(dw) * da into 8 f32 lanes. The IQ1 grid shift: IQ1_S sums it as one
// integer per block into a scalar (ggml: accum1 += d * sumi1), IQ1_M into a second set of
// lanes; both are added last as fma(0.125, shift, grid) (GCC contracts ggml's expression).
template <GgmlType T, class B>
float FormatIqK<T, B>::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  detail::Lanes8 acc, acc_shift;
  float acc_shift1 = 0.0f;
  IqDecoded dec;
  for (int64_t i = 0; i < nb; ++i) {
    iq_decode(w[i], dec);
    int32_t isum[8] = {}, dsum[8] = {};
    for (int e = 0; e < kQK_K; ++e) {
      const int lane = (e % 32) / 4, scale = dec.scale[e / 16];
      isum[lane] += scale * int32_t{dec.q[e]} * int32_t{a[i].qs[e]};
      dsum[lane] += scale * int32_t{dec.delta_sign[e / 8]} * int32_t{a[i].qs[e]};
    }
    const float d = block_weight_scale(w[i]) * a[i].d;
    acc.fma(d, isum);
    if constexpr (T == GgmlType::IQ1_S) {
      int32_t total = 0;
      for (int l = 0; l < 8; ++l) total += dsum[l];
      acc_shift1 = std::fma(d, static_cast<float>(total), acc_shift1);
    } else if constexpr (T == GgmlType::IQ1_M) {
      acc_shift.fma(d, dsum);
    }
  }
  if constexpr (T == GgmlType::IQ1_S) return std::fma(kIq1Delta, acc_shift1, acc.hsum());
  if constexpr (T == GgmlType::IQ1_M) return std::fma(kIq1Delta, acc_shift.hsum(), acc.hsum());
  return kSumScale<T> * acc.hsum();
}

// ggml's AVX2 order: block pairs (b, b+1) into two sets of lanes, added lane-wise and summed;
// an odd last block added as a scalar fma.
float FormatIQ4_NL::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  detail::Lanes8 acc[2];
  auto block_lanes = [&](int64_t i, int32_t (&isum)[8]) {
    int8_t v[kQK4_NL];
    for (int j = 0; j < kQK4_NL / 2; ++j) {
      v[j] = kIq4nlValues[w[i].qs[j] & 0xf];
      v[j + kQK4_NL / 2] = kIq4nlValues[w[i].qs[j] >> 4];
    }
    detail::add_lanes(v, a[i].qs, 1, isum);
  };
  int64_t i = 0;
  for (; i + 1 < nb; i += 2)
    for (int u = 0; u < 2; ++u) {
      int32_t isum[8] = {};
      block_lanes(i + u, isum);
      acc[u].fma(fp16_to_fp32(a[i + u].d) * fp16_to_fp32(w[i + u].d), isum);
    }
  acc[0].add(acc[1]);
  float sum = acc[0].hsum();
  if (i < nb) {
    int32_t isum[8] = {};
    block_lanes(i, isum);
    int32_t total = 0;
    for (int l = 0; l < 8; ++l) total += isum[l];
    sum = std::fma(fp16_to_fp32(a[i].d) * fp16_to_fp32(w[i].d), static_cast<float>(total), sum);
  }
  return sum;
}

template struct FormatIqK<GgmlType::IQ2_XXS, BlockIQ2_XXS>;
template struct FormatIqK<GgmlType::IQ2_XS, BlockIQ2_XS>;
template struct FormatIqK<GgmlType::IQ2_S, BlockIQ2_S>;
template struct FormatIqK<GgmlType::IQ3_XXS, BlockIQ3_XXS>;
template struct FormatIqK<GgmlType::IQ3_S, BlockIQ3_S>;
template struct FormatIqK<GgmlType::IQ1_S, BlockIQ1_S>;
template struct FormatIqK<GgmlType::IQ1_M, BlockIQ1_M>;
template struct FormatIqK<GgmlType::IQ4_XS, BlockIQ4_XS>;

}  // namespace df::quant
