// AVX2 kernels of Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4: block32_mk.h with vpmaddubsw + vpmaddwd for
// the lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include "quant/cpu/block32_mk.h"
#include "quant/cpu/family_kernels.h"
#include "quant/cpu/gemm_tiled.h"
#include "quant/cpu/kernels_isa.h"

namespace df::cpu {
namespace {

struct Ops {
  // u <= 31 for every format here, |s| <= 127: pair sums cannot saturate (2 * 31 * 127 < 32767)
  static __m256i dot4(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

template <class F>
struct MkOf;
template <> struct MkOf<quant::FormatQ4_0> { using T = block32::Mk<Ops, block32::PQ4_0, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ4_1> { using T = block32::Mk<Ops, block32::PQ4_1, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ5_0> { using T = block32::Mk<Ops, block32::PQ5_0, 2, 4, 1>; };
template <> struct MkOf<quant::FormatQ5_1> { using T = block32::Mk<Ops, block32::PQ5_1, 2, 4, 1>; };
template <> struct MkOf<quant::FormatMxfp4> { using T = block32::Mk<Ops, block32::PMxfp4, 2, 4, 1>; };
template <> struct MkOf<quant::FormatNvfp4> { using T = block32::Mk<Ops, block32::PNvfp4, 2, 4, 1>; };

}  // namespace

template <class F>
void LegacyAvx2<F>::quantize_act(const float* x, void* out, int64_t n) {
  using A = typename F::Act;
  A::quantize_act(x, static_cast<typename A::Block*>(out), n / A::block_elems);
}

template <class F>
float LegacyAvx2<F>::vec_dot(int64_t n, const void* w_row, const void* act_row) {
  const uint8_t* wp = static_cast<const uint8_t*>(w_row);
  const uint8_t* ap = static_cast<const uint8_t*>(act_row);
  float out;
  MkOf<F>::T::template tile<1, 1>(n, &wp, &ap, &out);
  return out;
}

template <class F>
void LegacyAvx2<F>::gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                           const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  tiled::gemm<typename MkOf<F>::T>(n, W, w_stride, i0, i1, act, act_stride, n_act, Y, ldy);
}

template struct LegacyAvx2<quant::FormatQ4_0>;
template struct LegacyAvx2<quant::FormatQ4_1>;
template struct LegacyAvx2<quant::FormatQ5_0>;
template struct LegacyAvx2<quant::FormatQ5_1>;
template struct LegacyAvx2<quant::FormatMxfp4>;
template struct LegacyAvx2<quant::FormatNvfp4>;

}  // namespace df::cpu
