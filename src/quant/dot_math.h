// The plain mathematical reference dot product: the weight row and the activation row
// dequantised (each format's dequantize_ref) and multiplied and summed in f64 in element
// order. No rounding but the formats' own, and no particular summation order: for checking
// that a kernel computes the right quantity (the integer decoding, scales and fixed factors),
// whatever its f32 order (the CUDA kernels, the float formats).
//
// Kept apart on purpose from the formats' dot_ref, which emulates ggml's x86 f32
// accumulation order (quant/ggml_lanes.h) so that every CPU kernel can be tested against it
// bit for bit. Differences between the two: f32 rounding of the scales' products and of the
// partial sums; for Q4_1 / Q5_1 also ggml's use of the activation's rounded fp16 sum
// s = fp16(d * sum(q)) in the min term, where the mathematics has d * sum(q).
// Baseline code only (header templates; not for the ISA translation units).
#pragma once
#include <cstdint>
#include <vector>

#include "quant/formats.h"

namespace df::quant {

template <WeightFormat F>
double dot_math(const typename F::Block* w, const typename F::Act::Block* a, int64_t nb) {
  using A = typename F::Act;
  const int64_t n = nb * F::block_elems;
  std::vector<float> wf(static_cast<size_t>(n)), af(static_cast<size_t>(n));
  F::dequantize_ref(w, wf.data(), nb);
  A::dequantize_ref(a, af.data(), n / A::block_elems);
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += static_cast<double>(wf[j]) * static_cast<double>(af[j]);
  return s;
}

// The same for a weight row of type w (n elements) and its activation row in the weight's
// activation format (cpu::vec_dot_type); throws df::Error for an unsupported type.
inline double dot_math(GgmlType w, const void* w_row, const void* act_row, int64_t n) {
  return visit_format(WeightFormats{}, w, [&]<class F>(F) {
    return dot_math<F>(static_cast<const typename F::Block*>(w_row),
                       static_cast<const typename F::Act::Block*>(act_row), n / F::block_elems);
  });
}

}  // namespace df::quant
