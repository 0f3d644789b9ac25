// K-quants: unpacking, reference dequantisation and dot product, and ggml's reference
// quantisers (quantize_row_q{2..6}_K_ref and their helpers make_qkx2_quants,
// make_q3_quants, make_qx_quants), re-implemented operation for operation so that the
// f32 rounding is the same (tests/models/test_dequant_ref.cpp checks the bytes).
#include "quant/formats_kquant.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "quant/ggml_lanes.h"
#include "quant/ggml_scalar.h"

namespace df::quant {

using detail::nearest_int;

namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml-quants.c GROUP_MAX_EPS

template <class T>
T clamp(T v, T lo, T hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// ---------------- ggml's scale searches ----------------

// make_qkx2_quants: asymmetric quantisation of x[n] to [0, nmax] with weights, trying
// nstep + 1 scales; returns the scale, writes the (negated) min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(clamp(l, 0, nmax));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// make_q3_quants with do_rmse: symmetric quantisation to [-nmax, nmax-1] refined by
// coordinate descent on the x^2-weighted error; L[i] = l + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qx_quants with rmse_type 1 and no importance weights (weights x^2): symmetric
// quantisation to [-nmax, nmax-1], best of 19 scales; L[i] = l + nmax.
float make_qx_quants_rmse1(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ---------------- per-format super-block quantisers ----------------

// 2-bit quants L[256] (element order) into Q2_K / Q3_K's qs layout.
void pack_2bit(const int8_t* L, uint8_t* qs) {
  for (int c = 0; c < kQK_K; c += 128)
    for (int l = 0; l < 32; ++l)
      qs[c / 4 + l] = static_cast<uint8_t>(L[c + l] | (L[c + l + 32] << 2) | (L[c + l + 64] << 4) |
                                           (L[c + l + 96] << 6));
}

void quantize_block(const float* x, BlockQ2_K& y) {
  uint8_t L[kQK_K], Laux[16];
  float weights[16], mins[16], scales[16];
  const float q4scale = 15.0f;
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
    y.d = fp32_to_fp16(max_scale / q4scale);
  } else {
    for (int j = 0; j < 16; ++j) y.scales[j] = 0;
    y.d = fp32_to_fp16(0.0f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < 16; ++j)
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | (nearest_int(iscale * mins[j]) << 4));
    y.dmin = fp32_to_fp16(max_min / q4scale);
  } else {
    y.dmin = fp32_to_fp16(0.0f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j] & 0xf);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<uint8_t>(clamp(nearest_int((x[16 * j + i] + dm) / d), 0, 3));
  }
  int8_t Ls[kQK_K];
  for (int i = 0; i < kQK_K; ++i) Ls[i] = static_cast<int8_t>(L[i]);
  pack_2bit(Ls, y.qs);
}

void quantize_block(const float* x, BlockQ3_K& y) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(y.scales, 0, 12);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
      l = static_cast<int8_t>(clamp<int>(l, -32, 31) + 32);
      if (j < 8)
        y.scales[j] = static_cast<uint8_t>(l & 0xf);
      else
        y.scales[j - 8] = static_cast<uint8_t>(y.scales[j - 8] | ((l & 0xf) << 4));
      l = static_cast<int8_t>(l >> 4);
      y.scales[j % 4 + 8] = static_cast<uint8_t>(y.scales[j % 4 + 8] | (l << (2 * (j / 4))));
    }
    y.d = fp32_to_fp16(1 / iscale);
  } else {
    y.d = fp32_to_fp16(0.0f);
  }
  for (int j = 0; j < 16; ++j) {
    int sc = j < 8 ? y.scales[j] & 0xf : y.scales[j - 8] >> 4;
    sc = (sc | (((y.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clamp(nearest_int(x[16 * j + i] / d), -4, 3) + 4);
  }
  std::memset(y.hmask, 0, sizeof(y.hmask));
  // high bit of element e goes to hmask[e % 32], bit e / 32
  for (int e = 0; e < kQK_K; ++e)
    if (L[e] > 3) {
      y.hmask[e % 32] = static_cast<uint8_t>(y.hmask[e % 32] | (1u << (e / 32)));
      L[e] = static_cast<int8_t>(L[e] - 4);
    }
  pack_2bit(L, y.qs);
}

// Q4_K / Q5_K: the shared part (sub-block scales and mins, final quants in [0, nmax]).
template <class B>
void quantize_block_k45(const float* x, B& y, int nmax, float rmin, int nstep, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      y.scales[j] = ls;
      y.scales[j + 4] = lm;
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      y.scales[j - 4] = static_cast<uint8_t>(y.scales[j - 4] | ((ls >> 4) << 6));
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | ((lm >> 4) << 6));
    }
  }
  y.d = fp32_to_fp16(max_scale / 63.0f);
  y.dmin = fp32_to_fp16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(y.scales, j, sc, m);
    const float d = fp16_to_fp32(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(y.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

void quantize_block(const float* x, BlockQ4_K& y) {
  uint8_t L[kQK_K];
  quantize_block_k45(x, y, 15, -1.0f, 20, L);
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l)
      y.qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + l + 32] << 4));
}

void quantize_block(const float* x, BlockQ5_K& y) {
  uint8_t L[kQK_K];
  quantize_block_k45(x, y, 31, -0.5f, 15, L);
  std::memset(y.qh, 0, sizeof(y.qh));
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) {
      const int l1 = L[64 * g + l], l2 = L[64 * g + l + 32];
      if (l1 > 15) y.qh[l] = static_cast<uint8_t>(y.qh[l] | (1u << (2 * g)));
      if (l2 > 15) y.qh[l] = static_cast<uint8_t>(y.qh[l] | (2u << (2 * g)));
      y.qs[32 * g + l] = static_cast<uint8_t>((l1 & 0xf) | ((l2 & 0xf) << 4));
    }
}

void quantize_block(const float* x, BlockQ6_K& y) {
  int8_t L[kQK_K];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = make_qx_quants_rmse1(16, 32, x + 16 * ib, L + 16 * ib);
    const float abs_scale = std::fabs(scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&y, 0, sizeof(y));
    return;
  }
  const float iscale = -128.0f / max_scale;
  y.d = fp32_to_fp16(1 / iscale);
  for (int ib = 0; ib < 16; ++ib) {
    const int v = nearest_int(iscale * scales[ib]);
    y.scales[ib] = static_cast<int8_t>(v < 127 ? v : 127);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j]);
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  for (int c = 0; c < 2; ++c) {
    const int8_t* Lc = L + 128 * c;
    uint8_t* ql = y.ql + 64 * c;
    uint8_t* qh = y.qh + 32 * c;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((Lc[l] & 0xf) | ((Lc[l + 64] & 0xf) << 4));
      ql[l + 32] = static_cast<uint8_t>((Lc[l + 32] & 0xf) | ((Lc[l + 96] & 0xf) << 4));
      qh[l] = static_cast<uint8_t>((Lc[l] >> 4) | ((Lc[l + 32] >> 4) << 2) | ((Lc[l + 64] >> 4) << 4) |
                                   ((Lc[l + 96] >> 4) << 6));
    }
  }
}

// ---------------- traits shared by dequantisation and the dot product ----------------

template <class B>
constexpr bool kHasMin = std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ4_K> ||
                         std::is_same_v<B, BlockQ5_K>;
template <class B>
constexpr int kSubBlock = std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K> ? 32 : 16;

template <class B>
float dmin_of(const B& b) {
  if constexpr (kHasMin<B>)
    return fp16_to_fp32(b.dmin);
  else
    return 0.0f;
}

}  // namespace

// ---------------- unpacking ----------------

void scale_min_k4(const uint8_t* q, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void unpack(const BlockQ2_K& b, KUnpacked& u) {
  for (int e = 0; e < kQK_K; ++e)
    u.q[e] = static_cast<int8_t>((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
  for (int j = 0; j < 16; ++j) {
    u.scale[j] = b.scales[j] & 0xf;
    u.min[j] = b.scales[j] >> 4;
  }
}

void unpack(const BlockQ3_K& b, KUnpacked& u) {
  for (int e = 0; e < kQK_K; ++e) {
    const int c = e / 128, j = (e % 128) / 32, l = e % 32;
    const int q = (b.qs[32 * c + l] >> (2 * j)) & 3;
    const bool high = (b.hmask[l] >> (4 * c + j)) & 1;
    u.q[e] = static_cast<int8_t>(q - (high ? 0 : 4));
  }
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? b.scales[j] & 0xf : b.scales[j - 8] >> 4;
    const int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
    u.scale[j] = (lo | (hi << 4)) - 32;
    u.min[j] = 0;
  }
}

void unpack(const BlockQ4_K& b, KUnpacked& u) {
  for (int e = 0; e < kQK_K; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    u.q[e] = static_cast<int8_t>(e % 64 < 32 ? byte & 0xf : byte >> 4);
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(b.scales, j, sc, m);
    u.scale[j] = sc;
    u.min[j] = m;
  }
}

void unpack(const BlockQ5_K& b, KUnpacked& u) {
  for (int e = 0; e < kQK_K; ++e) {
    const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
    const int lo = e % 64 < 32 ? byte & 0xf : byte >> 4;
    const int hi = (b.qh[e % 32] >> (e / 32)) & 1;
    u.q[e] = static_cast<int8_t>(lo | (hi << 4));
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(b.scales, j, sc, m);
    u.scale[j] = sc;
    u.min[j] = m;
  }
}

void unpack(const BlockQ6_K& b, KUnpacked& u) {
  for (int e = 0; e < kQK_K; ++e) {
    const int c = e / 128, j = (e % 128) / 32, l = e % 32;
    const uint8_t byte = b.ql[64 * c + 32 * (j % 2) + l];
    const int lo = j < 2 ? byte & 0xf : byte >> 4;
    const int hi = (b.qh[32 * c + l] >> (2 * j)) & 3;
    u.q[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
  for (int j = 0; j < 16; ++j) {
    u.scale[j] = b.scales[j];
    u.min[j] = 0;
  }
}

// ---------------- the format structs ----------------

// ggml's dequantize_row_q*_K: y = (d * scale) * q - (dmin * min), in that f32 order.
template <GgmlType T, class B>
void FormatK<T, B>::dequantize_ref(const Block* src, float* dst, int64_t nb) {
  constexpr int sub = kSubBlock<B>;
  KUnpacked u;
  for (int64_t b = 0; b < nb; ++b) {
    unpack(src[b], u);
    const float d = fp16_to_fp32(src[b].d);
    const float dmin = dmin_of(src[b]);
    for (int j = 0; j < kQK_K / sub; ++j) {
      const float dl = d * static_cast<float>(u.scale[j]);
      const float ml = dmin * static_cast<float>(u.min[j]);
      for (int i = 0; i < sub; ++i) {
        const float v = dl * static_cast<float>(u.q[sub * j + i]);
        dst[b * kQK_K + sub * j + i] = kHasMin<B> ? v - ml : v;
      }
    }
  }
}

template <GgmlType T, class B>
void FormatK<T, B>::quantize_ref(const float* src, Block* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) quantize_block(src + b * kQK_K, dst[b]);
}

// ggml's AVX2 vec_dot order (see ggml_lanes.h). Per super-block, with d = da * fp16(d)
// and dmin = -da * fp16(dmin), and sumi[l] the exact sum over the elements e with
// (e % 32) / 4 == l of scale(e) * q(e) * a(e):
//   Q2_K: acc = fma(dmin, prod, acc), prod[l] = m[2l]*bsum[2l] + m[2l+1]*bsum[2l+1];
//         then acc = fma(d, sumi, acc)
//   Q3_K: acc = fma(d, sumi, acc)
//   Q4_K: acc = fma(d, sumi, acc); acc_m[l] = fma(dmin, prod4[l], acc_m[l]) over 4 lanes with
//         prod4[l] = m[2l]*(b[4l]+b[4l+1]) + m[2l+1]*(b[4l+2]+b[4l+3]); the result adds
//         ((acc_m0 + acc_m2) + (acc_m1 + acc_m3)) after hsum(acc)
//   Q5_K: acc = fma(d, sumi, acc); summs = fma(dmin, sum_j m[j]*(b[2j]+b[2j+1]), summs)
//   Q6_K: q taken in [0, 63]: sumi[l] -= 32 * (sc[2l]*bsum[2l] + sc[2l+1]*bsum[2l+1]);
//         acc = fma(d, sumi, acc)
template <GgmlType T, class B>
float FormatK<T, B>::dot_ref(const Block* w, const Act::Block* a, int64_t nb) {
  constexpr int sub = kSubBlock<B>;
  constexpr bool q6 = std::is_same_v<B, BlockQ6_K>;
  KUnpacked u;
  detail::Lanes8 acc;
  float acc_m[4] = {0, 0, 0, 0};
  float summs = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    unpack(w[b], u);
    const BlockQ8_K& y = a[b];
    const float d = y.d * fp16_to_fp32(w[b].d);
    const float dmin = -y.d * dmin_of(w[b]);
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      int32_t prod[8];
      for (int l = 0; l < 8; ++l)
        prod[l] = u.min[2 * l] * y.bsums[2 * l] + u.min[2 * l + 1] * y.bsums[2 * l + 1];
      acc.fma(dmin, prod);
    }
    int32_t sumi[8] = {};
    for (int g = 0; g < kQK_K / 32; ++g) {
      for (int l = 0; l < 8; ++l)
        for (int i = 0; i < 4; ++i) {
          const int e = 32 * g + 4 * l + i;
          const int32_t q = q6 ? u.q[e] + 32 : u.q[e];
          sumi[l] += u.scale[e / sub] * q * y.qs[e];
        }
    }
    if constexpr (q6)
      for (int l = 0; l < 8; ++l)
        sumi[l] -= 32 * (y.bsums[2 * l] * u.scale[2 * l] + y.bsums[2 * l + 1] * u.scale[2 * l + 1]);
    acc.fma(d, sumi);
    if constexpr (std::is_same_v<B, BlockQ4_K>) {
      for (int l = 0; l < 4; ++l) {
        const int32_t p = u.min[2 * l] * (y.bsums[4 * l] + y.bsums[4 * l + 1]) +
                          u.min[2 * l + 1] * (y.bsums[4 * l + 2] + y.bsums[4 * l + 3]);
        acc_m[l] = std::fma(dmin, static_cast<float>(p), acc_m[l]);
      }
    }
    if constexpr (std::is_same_v<B, BlockQ5_K>) {
      int32_t p = 0;
      for (int j = 0; j < 8; ++j) p += u.min[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
      summs = std::fma(dmin, static_cast<float>(p), summs);
    }
  }
  if constexpr (std::is_same_v<B, BlockQ4_K>) return acc.hsum() + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]));
  if constexpr (std::is_same_v<B, BlockQ5_K>) return acc.hsum() + summs;
  return acc.hsum();
}

template struct FormatK<GgmlType::Q2_K, BlockQ2_K>;
template struct FormatK<GgmlType::Q3_K, BlockQ3_K>;
template struct FormatK<GgmlType::Q4_K, BlockQ4_K>;
template struct FormatK<GgmlType::Q5_K, BlockQ5_K>;
template struct FormatK<GgmlType::Q6_K, BlockQ6_K>;

}  // namespace df::quant
