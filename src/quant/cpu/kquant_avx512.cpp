// AVX-512 (VNNI) kernels of the K-quants: kquant_mk.h with vpmaddubsw + vpdpwssd
// for the scaled lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include "quant/cpu/family_kernels.h"
#include "quant/cpu/gemm_tiled.h"
#include "quant/cpu/kernels_isa.h"
#include "quant/cpu/kquant_mk.h"

namespace df::cpu {
namespace {

struct Ops {
  // vpdpwssd: acc + lo16 * s + hi16 * s; pair products cannot saturate (2 * 63 * 127 < 32767)
  static __m256i acc_scaled(__m256i acc, __m256i u, __m256i a, __m256i s16) {
    return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, a), s16);
  }
};

template <class F>
struct MkOf;
template <> struct MkOf<quant::FormatQ2_K> { using T = kquant::Mk<Ops, kquant::PQ2_K, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ3_K> { using T = kquant::Mk<Ops, kquant::PQ3_K, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ4_K> { using T = kquant::Mk<Ops, kquant::PQ4_K, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ5_K> { using T = kquant::Mk<Ops, kquant::PQ5_K, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ6_K> { using T = kquant::Mk<Ops, kquant::PQ6_K, 2, 4, 1>; };

}  // namespace

// Q8_K activations: ggml's own quantiser is scalar (quantize_row_q8_K_ref), so is ours.
template <class F>
void KquantAvx512<F>::quantize_act(const float* x, void* out, int64_t n) {
  quant::FormatQ8_K::quantize_act(x, static_cast<df::BlockQ8_K*>(out), n / df::kQK_K);
}

template <class F>
float KquantAvx512<F>::vec_dot(int64_t n, const void* w_row, const void* act_row) {
  const uint8_t* wp = static_cast<const uint8_t*>(w_row);
  const uint8_t* ap = static_cast<const uint8_t*>(act_row);
  float out;
  MkOf<F>::T::template tile<1, 1>(n, &wp, &ap, &out);
  return out;
}

template <class F>
void KquantAvx512<F>::gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                           const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  tiled::gemm<typename MkOf<F>::T>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
}

template struct KquantAvx512<quant::FormatQ2_K>;
template struct KquantAvx512<quant::FormatQ3_K>;
template struct KquantAvx512<quant::FormatQ4_K>;
template struct KquantAvx512<quant::FormatQ5_K>;
template struct KquantAvx512<quant::FormatQ6_K>;

}  // namespace df::cpu
