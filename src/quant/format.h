// A quantisation format as a C++ type: the block struct, its geometry, and the scalar
// reference code (dequantise, ggml's *_ref quantiser, the CPU backend's activation quantiser,
// the reference dot product). Adding a format = adding one such struct (see formats_*.h)
// and listing it in quant/formats.h; SIMD kernels are optional, per ISA
// (src/quant/cpu/registry.h), and fall back to this scalar code.
//
// The functions are declared here and defined out of line (formats_*.cpp) on purpose: the
// ISA translation units are compiled with -mavx512f etc., and an inline function from a
// shared header instantiated there could be picked by the linker for baseline callers.
#pragma once
#include <concepts>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "quant/types.h"

namespace df::quant {

// Any block format: geometry plus reference conversion to floats.
//   dequantize_ref(src[nb blocks], dst[nb * block_elems])
template <class F>
concept Format = requires(const typename F::Block* cb, float* x, int64_t nb) {
  { F::type } -> std::convertible_to<GgmlType>;
  { F::block_elems } -> std::convertible_to<int64_t>;
  F::dequantize_ref(cb, x, nb);
};

// A format with a deterministic reference quantiser (ggml's quantize_row_*_ref)
//   quantize_ref(src[nb * block_elems], dst[nb blocks]).
// Formats whose ggml quantiser needs an importance matrix or search tables (most IQ types)
// have none here: they are read from files, not written.
template <class F>
concept QuantizableFormat = Format<F> && requires(const float* cx, typename F::Block* b, int64_t nb) {
  F::quantize_ref(cx, b, nb);
};

// A format that activations are rounded to before a dot product (ggml's vec_dot_type),
// with quantize_act doing exactly what ggml-cpu's from_float does on x86 (AVX2 build).
template <class F>
concept ActFormat = QuantizableFormat<F> && requires(const float* cx, typename F::Block* b, int64_t nb) {
  F::quantize_act(cx, b, nb);
};

// A weight format: names its activation format and has a scalar reference dot product
//   dot_ref(w[nb blocks], a[nb * block_elems / Act::block_elems blocks of Act]) -> float,
// the kernel every SIMD kernel of the format is tested against. For the quantised formats it
// sums in ggml's x86 f32 order (quant/ggml_lanes.h), so those kernels match it and
// llama.cpp bit for bit; the plain mathematics is quant/dot_math.h.
// A weight block spans one or more whole activation blocks (NVFP4: 64 = 2 x Q8_0;
// Q1_0: 128 = 4 x Q8_0).
template <class F>
concept WeightFormat = Format<F> && ActFormat<typename F::Act> &&
    F::block_elems % F::Act::block_elems == 0 &&
    requires(const typename F::Block* w, const typename F::Act::Block* a, int64_t nb) {
      { F::dot_ref(w, a, nb) } -> std::same_as<float>;
    };

template <class... Fs>
struct TypeList {};

[[noreturn]] void throw_unsupported_type(GgmlType t);  // df::Error naming the type

// Calls fn(F{}) for every format F of List, in order.
template <class... Fs, class Fn>
void visit_all(TypeList<Fs...>, Fn&& fn) {
  (fn(Fs{}), ...);
}

// Calls fn(F{}) for the format F of List whose F::type == t; throws df::Error otherwise.
template <class... Fs, class Fn>
decltype(auto) visit_format(TypeList<Fs...>, GgmlType t, Fn&& fn) {
  using R = decltype(fn(std::tuple_element_t<0, std::tuple<Fs...>>{}));
  if constexpr (std::is_void_v<R>) {
    const bool found = ((Fs::type == t ? (fn(Fs{}), true) : false) || ...);
    if (!found) throw_unsupported_type(t);
  } else {
    R r{};
    const bool found = ((Fs::type == t ? (r = fn(Fs{}), true) : false) || ...);
    if (!found) throw_unsupported_type(t);
    return r;
  }
}

}  // namespace df::quant
