// Scalar reference kernels: the formats' reference code (src/quant/formats_*.cpp) applied
// row by row. Every SIMD kernel is tested against these.
#include "quant/cpu/kernels_isa.h"
#include "quant/formats.h"

namespace df::cpu {
namespace {

void quantize_act_scalar(GgmlType w, const float* x, void* out, int64_t n) {
  check_row_elems(w, n);
  quant::visit_format(quant::WeightFormats{}, w, [&]<class F>(F) {
    using A = typename F::Act;
    A::quantize_act(x, static_cast<typename A::Block*>(out), n / A::block_elems);
  });
}

float vec_dot_scalar(GgmlType w, int64_t n, const void* w_row, const void* act_row) {
  check_row_elems(w, n);
  return quant::visit_format(quant::WeightFormats{}, w, [&]<class F>(F) {
    return F::dot_ref(static_cast<const typename F::Block*>(w_row),
                      static_cast<const typename F::Act::Block*>(act_row), n / F::block_elems);
  });
}

void gemm_scalar(GgmlType w, int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                 const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  check_row_elems(w, n);
  quant::visit_format(quant::WeightFormats{}, w, [&]<class F>(F) {
    using WB = typename F::Block;
    using AB = typename F::Act::Block;
    const int64_t nb = n / F::block_elems;
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t r = 0; r < n_act; ++r)
        Y[r * ldy + i] = F::dot_ref(reinterpret_cast<const WB*>(W + i * w_stride),
                                    reinterpret_cast<const AB*>(act + r * act_stride), nb);
  });
}

}  // namespace

const Kernels kKernelsScalar = {Isa::SCALAR, &quantize_act_scalar, &vec_dot_scalar, &gemm_scalar};

}  // namespace df::cpu
