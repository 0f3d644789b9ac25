// AVX2 kernels for the IQ, ternary and 1-2 bit formats (formats_iq.h, formats_ternary.h,
// formats_q1q2.h). Called only after best_isa() has checked the CPU (kernels.cpp).
//
// Numerics: as ggml-cpu's AVX2 vec_dot for each type. Weights are decoded to int8 (grid
// magnitudes with signs, table values, ternary digits), multiplied with the int8
// activations by vpmaddubsw (|w| times a carrying w's sign: exact, |w| <= 127 and |a| <= 127
// so no pair sum saturates) and vpmaddwd with the integer sub-block scales into exact int32
// block sums, which are scaled by the block's f32 scale and accumulated in 8 f32 lanes.
// Only the order of those f32 additions differs from the scalar reference.
//
// Weights are decoded once per block and used for up to kCols activation rows (prefill):
// the decode (grid gathers, sign expansion) costs more than the products.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "quant/cpu/registry.h"
#include "quant/cpu/simd_avx2.h"
#include "quant/iq_tables.h"

namespace df::cpu {
namespace {

using df::BlockQ8_K;
using quant::kIq1sGrid;
using quant::kIq2sGrid;
using quant::kIq2xsGrid;
using quant::kIq2xsSignsPm1;
using quant::kIq2xxsGrid;
using quant::kIq3sGrid;
using quant::kIq3xxsGrid;
using quant::kIq4nlValues;
using df::kQK_K;

using simd::fp16;
using simd::hsum;
using simd::hsum_i32;
using simd::load_u32;
using simd::load_u64;

// 32 sign bits (bit j: element j negative) as +1 / -1 bytes.
inline __m256i bits_to_pm1(uint32_t bits) {
  const __m256i rep = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
                       3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(rep, sel), sel);
  return _mm256_or_si256(neg, _mm256_set1_epi8(1));
}

[[maybe_unused]] inline __m256i scale_pair(int lo, int hi) {  // int16 lanes: elements 0-15 lo, 16-31 hi
  return _mm256_setr_m128i(_mm_set1_epi16(static_cast<short>(lo)), _mm_set1_epi16(static_cast<short>(hi)));
}

// ---------------- IQ formats with Q8_K activations ----------------

// One 32-element sub-block of a weight row, ready for the dot with Q8_K:
//   mag  unsigned magnitudes, sgn  +1 / -1 / 0 bytes (the weight's sign, applied to the
//   activation), sc  int16 scale per pair lane, dsgn  +-1 bytes of the IQ1 grid shift.
struct Sub {
  __m256i mag, sgn, sc, dsgn;
};

// Decoders: Block, kFinal (fixed f32 factor of the block sums), kDelta (IQ1_M grid shift,
// summed in lanes like the grid values; IQ1_S instead has shift_sum, one integer per block
// from the activation's bsums, as ggml),
// kGroup (sub-blocks decoded together), Pro (per-block state from prologue, e.g. the
// sub-block scales), scale(block) -> f32 block scale, and
// decode(block, pro, g, sub[kGroup]) for sub-blocks [g kGroup, (g + 1) kGroup).
struct NoPro {};

// 16 int8 scales (natural order, one per 16 elements) -> the int16 lanes of sub-block ib.
inline __m256i sub_scales(__m128i scales8, int ib) {
  const __m128i pick = _mm_add_epi8(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                    _mm_set1_epi8(static_cast<char>(2 * ib)));
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(scales8, pick));
}
// Scale nibbles of 8 bytes (low nibble first) as 2 n + 1 in natural order.
inline __m128i odd_nibble_scales(uint64_t bytes) {
  const __m128i x = _mm_set1_epi64x(static_cast<long long>(bytes));
  const __m128i m4 = _mm_set1_epi8(0x0f);
  const __m128i n = _mm_unpacklo_epi8(_mm_and_si128(x, m4), _mm_and_si128(_mm_srli_epi16(x, 4), m4));
  return _mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1));
}
// 4 grid rows of 8 bytes from 4 16-bit indices packed in a uint64.
inline __m256i grid4(const uint64_t* t, uint64_t idx4) {
  return _mm256_set_epi64x(static_cast<long long>(t[idx4 >> 48]), static_cast<long long>(t[(idx4 >> 32) & 0xffff]),
                           static_cast<long long>(t[(idx4 >> 16) & 0xffff]), static_cast<long long>(t[idx4 & 0xffff]));
}

struct DecIQ2_XXS {
  using Block = BlockIQ2_XXS;
  using Pro = NoPro;
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block&, Pro&) {}
  static void decode(const Block& b, const Pro&, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    const uint32_t idx = load_u32(b.qs + 4 * ib), aux = load_u32(b.qs + 4 * ib + 2);
    s.mag = grid4(kIq2xxsGrid, _pdep_u64(idx, 0x00ff00ff00ff00ffull));
    s.sgn = _mm256_set_epi64x(static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 21) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 14) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 7) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[aux & 127]));
    s.sc = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};

// Four sub-blocks at a time: 16 entries of 9-bit grid index | 7-bit sign code << 9. The
// sign code's parity bit is looked up by nibble (vpshufb), bits expanded to bytes by
// shuffles (as ggml's AVX2 code).
struct DecIQ2_XS {
  using Block = BlockIQ2_XS;
  struct Pro {
    __m128i scales8;
  };
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 4;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block& b, Pro& pro) { pro.scales8 = odd_nibble_scales(load_u64(b.scales)); }
  static void decode(const Block& b, const Pro& pro, int g, Sub (&s)[4]) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 16 * g));
    alignas(32) uint16_t idx[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(idx), _mm256_and_si256(q, _mm256_set1_epi16(511)));
    const __m256i code = _mm256_srli_epi16(q, 9);
    const __m256i par_nibble = _mm256_xor_si256(code, _mm256_srli_epi16(q, 13));  // same parity, 4 bits
    const __m256i odd = _mm256_shuffle_epi8(
        _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0, -128, -128, 0,
                         -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0),
        par_nibble);
    const __m256i signs = _mm256_or_si256(code, odd);  // sign byte in the low byte of each 16-bit lane
    const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    const __m256i pick0 = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4,
                                           6, 6, 6, 6, 6, 6, 6, 6);
    const __m256i pick1 = _mm256_add_epi8(pick0, _mm256_set1_epi8(8));
    for (int h = 0; h < 2; ++h) {
      const __m128i half = h == 0 ? _mm256_castsi256_si128(signs) : _mm256_extracti128_si256(signs, 1);
      const __m256i both = _mm256_setr_m128i(half, half);
      for (int j = 0; j < 2; ++j) {
        const __m256i bytes = _mm256_shuffle_epi8(both, j == 0 ? pick0 : pick1);
        const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, sel), sel);
        Sub& o = s[2 * h + j];
        o.sgn = _mm256_or_si256(neg, _mm256_set1_epi8(1));
        const uint16_t* e = idx + 8 * h + 4 * j;
        o.mag = _mm256_set_epi64x(static_cast<long long>(kIq2xsGrid[e[3]]), static_cast<long long>(kIq2xsGrid[e[2]]),
                                  static_cast<long long>(kIq2xsGrid[e[1]]), static_cast<long long>(kIq2xsGrid[e[0]]));
        o.sc = sub_scales(pro.scales8, 4 * g + 2 * h + j);
      }
    }
  }
};

struct DecIQ2_S {
  using Block = BlockIQ2_S;
  struct Pro {
    __m128i scales8;
  };
  static constexpr float kFinal = 0.125f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block& b, Pro& pro) { pro.scales8 = odd_nibble_scales(load_u64(b.scales)); }
  static void decode(const Block& b, const Pro& pro, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    const uint64_t idx = _pdep_u64(load_u32(b.qs + 4 * ib), 0x00ff00ff00ff00ffull) |
                         _pdep_u64(b.qh[ib], 0x0300030003000300ull);
    s.mag = grid4(kIq2sGrid, idx);
    s.sgn = bits_to_pm1(load_u32(b.qs + kQK_K / 8 + 4 * ib));
    s.sc = sub_scales(pro.scales8, ib);
  }
};

struct DecIQ3_XXS {
  using Block = BlockIQ3_XXS;
  using Pro = NoPro;
  static constexpr float kFinal = 0.25f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block&, Pro&) {}
  static void decode(const Block& b, const Pro&, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    const uint8_t* q = b.qs + 8 * ib;
    const uint32_t aux = load_u32(b.qs + kQK_K / 4 + 4 * ib);
    s.mag = _mm256_set_epi32(static_cast<int>(kIq3xxsGrid[q[7]]), static_cast<int>(kIq3xxsGrid[q[6]]),
                             static_cast<int>(kIq3xxsGrid[q[5]]), static_cast<int>(kIq3xxsGrid[q[4]]),
                             static_cast<int>(kIq3xxsGrid[q[3]]), static_cast<int>(kIq3xxsGrid[q[2]]),
                             static_cast<int>(kIq3xxsGrid[q[1]]), static_cast<int>(kIq3xxsGrid[q[0]]));
    s.sgn = _mm256_set_epi64x(static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 21) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 14) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[(aux >> 7) & 127]),
                              static_cast<long long>(kIq2xsSignsPm1.v[aux & 127]));
    s.sc = _mm256_set1_epi16(static_cast<short>(2 * (aux >> 28) + 1));
  }
};

struct DecIQ3_S {
  using Block = BlockIQ3_S;
  using Pro = NoPro;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block&, Pro&) {}
  static void decode(const Block& b, const Pro&, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    // 8 indices (4 elements each): qs byte | bit j of qh << 8, as 16-bit fields of two uint64
    const uint64_t lo4 = _pdep_u64(load_u32(b.qs + 8 * ib), 0x00ff00ff00ff00ffull) |
                         _pdep_u64(b.qh[ib] & 0xf, 0x0100010001000100ull);
    const uint64_t hi4 = _pdep_u64(load_u32(b.qs + 8 * ib + 4), 0x00ff00ff00ff00ffull) |
                         _pdep_u64(b.qh[ib] >> 4, 0x0100010001000100ull);
    s.mag = _mm256_set_epi32(static_cast<int>(kIq3sGrid[hi4 >> 48]), static_cast<int>(kIq3sGrid[(hi4 >> 32) & 0xffff]),
                             static_cast<int>(kIq3sGrid[(hi4 >> 16) & 0xffff]), static_cast<int>(kIq3sGrid[hi4 & 0xffff]),
                             static_cast<int>(kIq3sGrid[lo4 >> 48]), static_cast<int>(kIq3sGrid[(lo4 >> 32) & 0xffff]),
                             static_cast<int>(kIq3sGrid[(lo4 >> 16) & 0xffff]), static_cast<int>(kIq3sGrid[lo4 & 0xffff]));
    s.sgn = bits_to_pm1(load_u32(b.signs + 4 * ib));
    const int ls = ib % 2 == 0 ? b.scales[ib / 2] & 0xf : b.scales[ib / 2] >> 4;
    s.sc = _mm256_set1_epi16(static_cast<short>(2 * ls + 1));
  }
};

struct DecIQ1_S {
  using Block = BlockIQ1_S;
  // The grid shift's weights per 16-element group: +-(2 s + 1) of its sub-block.
  struct Pro {
    __m256i shift16;
  };
  [[maybe_unused]] static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block& b, Pro& pro) {
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qh));
    const __m128i ls = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(qh, 12), _mm_set1_epi16(7)), 1),
                                    _mm_set1_epi16(1));
    const __m128i neg = _mm_srai_epi16(qh, 15);
    const __m128i v = _mm_sub_epi16(_mm_xor_si128(ls, neg), neg);
    pro.shift16 = _mm256_setr_m128i(_mm_unpacklo_epi16(v, v), _mm_unpackhi_epi16(v, v));
  }
  static void decode(const Block& b, const Pro&, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    const unsigned qh = b.qh[ib];
    const uint64_t idx = _pdep_u64(load_u32(b.qs + 4 * ib), 0x00ff00ff00ff00ffull) | _pdep_u64(qh, 0x0700070007000700ull);
    const __m256i v = grid4(kIq1sGrid, idx);
    s.mag = _mm256_sign_epi8(v, v);
    s.sgn = v;
    s.sc = _mm256_set1_epi16(static_cast<short>(2 * ((qh >> 12) & 7) + 1));
  }
  // sum over 16-element groups of (+-1 shift sign) * scale * (the group's activation sum)
  static int32_t shift_sum(const Pro& pro, const BlockQ8_K& a) {
    const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
    return hsum_i32(_mm256_madd_epi16(bs, pro.shift16));
  }
};

struct DecIQ1_M {
  using Block = BlockIQ1_M;
  struct Pro {
    __m128i scales8;
  };
  [[maybe_unused]] static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = true;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    return fp16(static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                      (sc[3] & 0xf000)));
  }
  static void prologue(const Block& b, Pro& pro) {
    uint16_t sc[4];
    std::memcpy(sc, b.scales, sizeof sc);
    // 3-bit scales, 4 per 16-bit word (elements 16 g .. 16 g + 15 for g = 4 w + k)
    const uint64_t lo = _pdep_u64(sc[0] & 0xfff, 0x07070707ull) | (_pdep_u64(sc[1] & 0xfff, 0x07070707ull) << 32);
    const uint64_t hi = _pdep_u64(sc[2] & 0xfff, 0x07070707ull) | (_pdep_u64(sc[3] & 0xfff, 0x07070707ull) << 32);
    const __m128i n = _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
    pro.scales8 = _mm_add_epi8(_mm_add_epi8(n, n), _mm_set1_epi8(1));
  }
  static void decode(const Block& b, const Pro& pro, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    uint16_t qh;
    std::memcpy(&qh, b.qh + 2 * ib, 2);  // a nibble per 8 elements: 3 index bits, shift sign
    const uint64_t idx = _pdep_u64(load_u32(b.qs + 4 * ib), 0x00ff00ff00ff00ffull) |
                         _pdep_u64(qh & 0x7777u, 0x0f000f000f000f00ull);
    const __m256i v = grid4(kIq1sGrid, idx);
    s.mag = _mm256_sign_epi8(v, v);
    s.sgn = v;
    s.sc = sub_scales(pro.scales8, ib);
    // bit 3 of each nibble -> the top bit of a byte, sign-extended over the group's 8 bytes
    const uint32_t dbytes = static_cast<uint32_t>(_pdep_u64(qh & 0x8888u, 0xf0f0f0f0ull));
    s.dsgn = _mm256_or_si256(_mm256_cvtepi8_epi64(_mm_cvtsi32_si128(static_cast<int>(dbytes))), _mm256_set1_epi8(1));
  }
};

struct DecIQ4_XS {
  using Block = BlockIQ4_XS;
  using Pro = NoPro;
  static constexpr float kFinal = 1.0f;
  static constexpr bool kDelta = false;
  static constexpr int kGroup = 1;
  static float scale(const Block& b) { return fp16(b.d); }
  static void prologue(const Block&, Pro&) {}
  static void decode(const Block& b, const Pro&, int ib, Sub (&sub)[1]) {
    Sub& s = sub[0];
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * ib));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i v = _mm256_setr_m128i(_mm_shuffle_epi8(values, _mm_and_si128(bits, m4)),
                                        _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits, 4), m4)));
    s.mag = _mm256_sign_epi8(v, v);
    s.sgn = v;
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    s.sc = _mm256_set1_epi16(static_cast<short>(ls - 32));
  }
};

template <class Dec>
concept HasShiftSum = requires(const typename Dec::Pro& p, const BlockQ8_K& a) { Dec::shift_sum(p, a); };

// Microkernel over one weight row (decoded once per block) and up to kCols activation rows.
// f32 order as ggml's AVX2 vec_dot (ggml_lanes.h): acc = fma(d, float(lanes), acc) per
// block, kFinal * hsum; the IQ1 shift added last as fma(0.125, shift, hsum).
template <class Dec>
struct MkIqK {
  static constexpr int kRows = 1, kCols = 4, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile
  using Block = typename Dec::Block;
  static constexpr int G = Dec::kGroup;
  static constexpr bool kShiftSum = HasShiftSum<Dec>;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_K*>(ap[c]);
    __m256 acc[C], accd[C];
    float acc_shift[C];
    for (int c = 0; c < C; ++c) {
      acc[c] = accd[c] = _mm256_setzero_ps();
      acc_shift[c] = 0.0f;
    }
    const __m256i ones = _mm256_set1_epi8(1);
    const int64_t nb = n / kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      typename Dec::Pro pro;
      Dec::prologue(w[b], pro);
      __m256i isum[C], dsum[C];
      for (int c = 0; c < C; ++c) isum[c] = dsum[c] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int g = 0; g < 8 / G; ++g) {
        Sub s[G];
        Dec::decode(w[b], pro, g, s);
#pragma GCC unroll 4
        for (int j = 0; j < G; ++j) {
          const int ib = g * G + j;
#pragma GCC unroll 8
          for (int c = 0; c < C; ++c) {
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs + 32 * ib));
            const __m256i p = _mm256_maddubs_epi16(s[j].mag, _mm256_sign_epi8(q8, s[j].sgn));
            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, s[j].sc));
            if constexpr (Dec::kDelta) {
              const __m256i pd = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, s[j].dsgn));
              dsum[c] = _mm256_add_epi32(dsum[c], _mm256_madd_epi16(pd, s[j].sc));
            }
          }
        }
      }
      const float dw = Dec::scale(w[b]);
      for (int c = 0; c < C; ++c) {
        const float dd = dw * a[c][b].d;
        const __m256 d = _mm256_set1_ps(dd);
        acc[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum[c]), acc[c]);
        if constexpr (Dec::kDelta) accd[c] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dsum[c]), accd[c]);
        if constexpr (kShiftSum)
          acc_shift[c] = std::fma(dd, static_cast<float>(Dec::shift_sum(pro, a[c][b])), acc_shift[c]);
      }
    }
    for (int c = 0; c < C; ++c) {
      if constexpr (Dec::kDelta)
        out[c] = std::fma(0.125f, hsum(accd[c]), hsum(acc[c]));
      else if constexpr (kShiftSum)
        out[c] = std::fma(0.125f, acc_shift[c], hsum(acc[c]));
      else
        out[c] = Dec::kFinal * hsum(acc[c]);
    }
  }
};

// ---------------- TQ1_0 / TQ2_0 (Q8_K) ----------------

// Ternary digits q in {0, 1, 2} (TQ2_0 may hold 3) as bytes; dot = sum(q * a) - sum(a),
// the second term from the activation's bsums.
struct DecTQ2_0 {
  using Block = BlockTQ2_0;
  // Element 128 * h + 32 * l + m is bits 2l of qs[32 h + m]: 8 vectors of 32.
  static void digits(const Block& b, __m256i (&q)[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * h));
      q[4 * h + 0] = _mm256_and_si256(x, m3);
      q[4 * h + 1] = _mm256_and_si256(_mm256_srli_epi16(x, 2), m3);
      q[4 * h + 2] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m3);
      q[4 * h + 3] = _mm256_and_si256(_mm256_srli_epi16(x, 6), m3);
    }
  }
};

// TQ1_0 trit n of byte x: top two bits of (x * 3^n mod 256) * 3, i.e. ((x 3^n) * 3) >> 8;
// computed per byte as ggml does: x * 3^n by shifts and adds, then
// avg(y, avg(y, 0)) with y = x - 1 (saturating) = (3x) / 2 / 128 in the top bits.
inline __m256i trit_top(__m256i x) {
  const __m256i y = _mm256_subs_epu8(x, _mm256_set1_epi8(1));
  const __m256i t = _mm256_avg_epu8(y, _mm256_avg_epu8(y, _mm256_setzero_si256()));
  return _mm256_and_si256(_mm256_srli_epi16(t, 6), _mm256_set1_epi8(3));
}
inline __m256i mul3(__m256i x) { return _mm256_add_epi8(x, _mm256_add_epi8(x, x)); }
inline __m256i mul9(__m256i x) {  // x * 9 mod 256 per byte
  return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}

struct DecTQ1_0 {
  using Block = BlockTQ1_0;
  // Element order: qs[0..32) trits 0-4 (5 x 32), qs[32..48) trits 0-4 (5 x 16), qh trits 0-3 (4 x 4).
  static void digits(const Block& b, __m256i (&q)[8]) {
    const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    const __m256i x1 = mul3(x0), x2 = mul9(x0), x3 = mul9(x1), x4 = mul9(x2);
    q[0] = trit_top(x0);
    q[1] = trit_top(x1);
    q[2] = trit_top(x2);
    q[3] = trit_top(x3);
    q[4] = trit_top(x4);
    const __m128i y0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 32));
    const __m256i y = _mm256_setr_m128i(y0, y0);
    const __m256i y1 = mul3(y), y2 = mul9(y), y3 = mul9(y1), y4 = mul9(y2);
    // elements 160..255: [y0 | y0*3], [y0*9 | y0*27], [y0*81 | qh trits]
    const uint32_t qh = load_u32(b.qh);
    __m256i h = _mm256_cvtepu8_epi16(_mm_set1_epi32(static_cast<int>(qh)));
    h = _mm256_mullo_epi16(h, _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27));
    h = _mm256_and_si256(h, _mm256_set1_epi16(0xff));
    const __m128i h8 = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q[5] = trit_top(_mm256_blend_epi32(y, y1, 0xf0));
    q[6] = trit_top(_mm256_blend_epi32(y2, y3, 0xf0));
    q[7] = trit_top(_mm256_setr_m128i(_mm256_castsi256_si128(y4), h8));
  }
};

template <class Dec>
struct MkTq {
  static constexpr int kRows = 1, kCols = 4, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile
  using Block = typename Dec::Block;

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_K* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_K*>(ap[c]);
    __m256 acc[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t nb = n / kQK_K;
    for (int64_t b = 0; b < nb; ++b) {
      __m256i q[8];
      Dec::digits(w[b], q);
      const float dw = fp16(w[b].d);
      for (int c = 0; c < C; ++c) {
        // int16 lanes: 8 products of <= 3 * 127 each, minus a 16-element activation sum
        __m256i s16 = _mm256_sub_epi16(_mm256_setzero_si256(),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].bsums)));
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs + 32 * k));
          s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(q[k], q8));
        }
        const __m256i s32 = _mm256_madd_epi16(s16, ones16);
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a[c][b].d * dw), _mm256_cvtepi32_ps(s32), acc[c]);
      }
    }
    for (int c = 0; c < C; ++c) out[c] = hsum(acc[c]);
  }
};

// ---------------- IQ4_NL (Q8_0) ----------------

// ggml's order: blocks b (even) and b+1 (odd) into two accumulators, added lane-wise and
// summed; an odd last block added as a scalar fma.
struct MkIq4Nl {
  static constexpr int kRows = 1, kCols = 4, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const BlockIQ4_NL* w = reinterpret_cast<const BlockIQ4_NL*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    __m256 acc[2][C];
    for (int u = 0; u < 2; ++u)
      for (int c = 0; c < C; ++c) acc[u][c] = _mm256_setzero_ps();
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t nb = n / kQK4_NL;
    // lane sums of block b against activation row c
    auto lanes = [&](int64_t b, int c, __m256i mag, __m256i v) {
      const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[c][b].qs));
      return _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(q8, v)), ones16);
    };
    auto values_of = [&](int64_t b) {
      const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs));
      return _mm256_setr_m128i(_mm_shuffle_epi8(values, _mm_and_si128(bits, m4)),
                               _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits, 4), m4)));
    };
    int64_t b = 0;
    for (; b + 1 < nb; b += 2)
      for (int u = 0; u < 2; ++u) {
        const __m256i v = values_of(b + u), mag = _mm256_sign_epi8(v, v);
        const float dw = fp16(w[b + u].d);
        for (int c = 0; c < C; ++c)
          acc[u][c] = _mm256_fmadd_ps(_mm256_set1_ps(fp16(a[c][b + u].d) * dw), _mm256_cvtepi32_ps(lanes(b + u, c, mag, v)),
                                      acc[u][c]);
      }
    for (int c = 0; c < C; ++c) out[c] = hsum(_mm256_add_ps(acc[0][c], acc[1][c]));
    if (b < nb) {
      const __m256i v = values_of(b), mag = _mm256_sign_epi8(v, v);
      const float dw = fp16(w[b].d);
      for (int c = 0; c < C; ++c)
        out[c] = std::fma(fp16(a[c][b].d) * dw, static_cast<float>(hsum_i32(lanes(b, c, mag, v))), out[c]);
    }
  }
};

// ---------------- Q1_0 / Q2_0 (Q8_0, one weight block over several activation blocks) ----------------

// Q1_0: 32 sign bits -> activation with the weight's sign applied (x ^ m) - m.
inline __m256i apply_sign_bits(__m256i q8, uint32_t bits) {
  const __m256i rep = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3,
                       3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i neg = _mm256_cmpeq_epi8(_mm256_and_si256(rep, sel), _mm256_setzero_si256());  // bit clear: -
  return _mm256_sub_epi8(_mm256_xor_si256(q8, neg), neg);
}

// Q2_0: the 2-bit codes of 8 bytes (32 elements, 4 per byte, low bits first) as bytes.
inline __m256i q2_codes(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  const __m256i rep = _mm256_shuffle_epi8(
      _mm256_set1_epi64x(static_cast<long long>(v)),
      _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7,
                       7, 7));
  const __m256i m0 = _mm256_set1_epi32(0x00000003), m1 = _mm256_set1_epi32(0x00000300),
                m2 = _mm256_set1_epi32(0x00030000), m3 = _mm256_set1_epi32(0x03000000);
  return _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(rep, m0), _mm256_and_si256(_mm256_srli_epi32(rep, 2), m1)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(rep, 4), m2), _mm256_and_si256(_mm256_srli_epi32(rep, 6), m3)));
}

// Q1_0 in ggml's AVX2 order: per weight block, lanes d(a_0) * isum_0, fma(d(a_k), isum_k)
// for k = 1..3, then acc = fma(dw, block, acc). Q2_0 in ggml's generic (scalar) order: the
// integer sums of its two Q8_0 blocks by SIMD, then block = fma(d(a_k), isum_k, block),
// sum = fma(dw, block, sum) in scalar f32.
template <bool kQ1>
struct MkQ1Q2 {
  static constexpr int kRows = 1, kCols = 4, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // one f32 order per output in every tile
  using Block = std::conditional_t<kQ1, BlockQ1_0, BlockQ2_0>;
  static constexpr int kSub = kQ1 ? 4 : 2;  // Q8_0 blocks per weight block

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    static_assert(R == 1);
    const Block* w = reinterpret_cast<const Block*>(wp[0]);
    const BlockQ8_0* a[C];
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const BlockQ8_0*>(ap[c]);
    __m256 acc[C];
    float sum[C];
    for (int c = 0; c < C; ++c) {
      acc[c] = _mm256_setzero_ps();
      sum[c] = 0.0f;
    }
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t nb = n / (32 * kSub);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i codes[kSub];
      uint32_t bits[kSub];
      if constexpr (kQ1)
        for (int k = 0; k < kSub; ++k) bits[k] = load_u32(w[b].qs + 4 * k);
      else
        for (int k = 0; k < kSub; ++k) codes[k] = q2_codes(w[b].qs + 8 * k);
      const float dw = fp16(w[b].d);
      for (int c = 0; c < C; ++c) {
        if constexpr (kQ1) {
          __m256 blk = _mm256_setzero_ps();
          for (int k = 0; k < kSub; ++k) {
            const BlockQ8_0& ab = a[c][kSub * b + k];
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, apply_sign_bits(q8, bits[k])), ones16);
            const __m256 da = _mm256_set1_ps(fp16(ab.d));
            blk = k == 0 ? _mm256_mul_ps(da, _mm256_cvtepi32_ps(p)) : _mm256_fmadd_ps(da, _mm256_cvtepi32_ps(p), blk);
          }
          acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw), blk, acc[c]);
        } else {
          float blk = 0.0f;
          for (int k = 0; k < kSub; ++k) {
            const BlockQ8_0& ab = a[c][kSub * b + k];
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs));
            // (q - 1) * a = q * a - a; pair sums of q * a <= 2 * 3 * 127
            const __m256i p16 = _mm256_sub_epi16(_mm256_maddubs_epi16(codes[k], q8), _mm256_maddubs_epi16(ones8, q8));
            blk = std::fma(fp16(ab.d), static_cast<float>(hsum_i32(_mm256_madd_epi16(p16, ones16))), blk);
          }
          sum[c] = std::fma(dw, blk, sum[c]);
        }
      }
    }
    for (int c = 0; c < C; ++c) out[c] = kQ1 ? hsum(acc[c]) : sum[c];
  }
};

// ---------------- this file's part of the AVX2 registry (registry.h) ----------------
// Activations (Q8_K, Q8_0) use the registry's quantisers.

template <class F>
struct Simd {};
template <> struct Simd<quant::FormatIQ2_XXS> { using Mk = MkIqK<DecIQ2_XXS>; };
template <> struct Simd<quant::FormatIQ2_XS> { using Mk = MkIqK<DecIQ2_XS>; };
template <> struct Simd<quant::FormatIQ2_S> { using Mk = MkIqK<DecIQ2_S>; };
template <> struct Simd<quant::FormatIQ3_XXS> { using Mk = MkIqK<DecIQ3_XXS>; };
template <> struct Simd<quant::FormatIQ3_S> { using Mk = MkIqK<DecIQ3_S>; };
template <> struct Simd<quant::FormatIQ1_S> { using Mk = MkIqK<DecIQ1_S>; };
template <> struct Simd<quant::FormatIQ1_M> { using Mk = MkIqK<DecIQ1_M>; };
template <> struct Simd<quant::FormatIQ4_XS> { using Mk = MkIqK<DecIQ4_XS>; };
template <> struct Simd<quant::FormatIQ4_NL> { using Mk = MkIq4Nl; };
template <> struct Simd<quant::FormatTQ1_0> { using Mk = MkTq<DecTQ1_0>; };
template <> struct Simd<quant::FormatTQ2_0> { using Mk = MkTq<DecTQ2_0>; };
template <> struct Simd<quant::FormatQ1_0> { using Mk = MkQ1Q2<true>; };
template <> struct Simd<quant::FormatQ2_0> { using Mk = MkQ1Q2<false>; };

}  // namespace

constinit const Registry kLowbitAvx2Part = make_registry<Simd>();

}  // namespace df::cpu
