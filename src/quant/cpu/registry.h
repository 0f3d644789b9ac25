// Internal: how SIMD kernels plug in. One mechanism for every format and ISA:
//
//   1. An ISA translation unit (kernels_avx2.cpp, legacy_avx512.cpp, ...) declares, in an
//      anonymous namespace, `template <class F> struct Simd {};` and specialises it for the
//      formats it accelerates:
//        using Mk = ...;                       F as a weight format: a microkernel
//                                              (gemm_tiled.h) giving vec_dot and gemm
//        static void gemm(...);                optional: its own gemm (Kernels::gemm's
//                                              contract), instead of tiled::gemm<Mk>; alone
//                                              (no Mk), vec_dot falls back to the ISA below
//        using MkExact = ...;                  optional: a row-exact microkernel (gemm_tiled.h
//                                              RowExact) for Kernels::gemm_exact, where Mk's
//                                              order depends on the tile shape
//        static void gemm_exact(...);          optional: its own gemm_exact
//        static constexpr bool kShapeFree;     with its own gemm: that gemm is row exact
//        static void quantize(const float* x, void* out, int64_t n);
//                                              F as an activation format: x[n] -> blocks of F
//   2. It defines its part of the ISA's registry with
//        constinit const Registry kPart... = make_registry<Simd>();
//      which walks the one list of formats (quant/formats.h: WeightFormats, ActFormats) and
//      takes each specialisation's functions (nullptr where it has none).
//   3. kernels.cpp merges the parts of each ISA and applies the one fallback rule: per
//      format and per function, AVX-512 -> AVX2 -> scalar, the first ISA that has it.
//
// Everything instantiated here takes the translation unit's own Simd / Mk types (anonymous
// namespace), so it has internal linkage: code compiled for one ISA is never merged into
// another's callers.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "quant/cpu/gemm_tiled.h"
#include "quant/formats.h"

namespace df::cpu {

// One format's kernels on one ISA (contracts as Kernels in kernels.h, with the type fixed
// and n checked); nullptr where this ISA has none.
struct FormatKernels {
  // as an activation format: x[n] floats -> n / block_elems blocks
  void (*quantize)(const float* x, void* out, int64_t n) = nullptr;
  // as a weight format
  float (*vec_dot)(int64_t n, const void* w_row, const void* act_row) = nullptr;
  void (*gemm)(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
               const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) = nullptr;
  // gemm whose every output has the bits of n_act = 1 (Kernels::gemm_exact); nullptr: none
  // (kernels.cpp then runs gemm one activation row at a time)
  void (*gemm_exact)(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                     const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) = nullptr;
};

// Kernels by GgmlType id.
inline constexpr size_t kTypeSlots = 48;
using Registry = std::array<FormatKernels, kTypeSlots>;
constexpr size_t slot(GgmlType t) { return static_cast<size_t>(t); }

// The parts of each ISA's registry, one per translation unit (merged in kernels.cpp).
extern const Registry kScalarPart;       // kernels_scalar.cpp: every format's reference code
extern const Registry kFloatQ8Avx2Part;  // kernels_avx2.cpp: F32 F16 BF16 Q8_0
extern const Registry kLegacyAvx2Part;   // legacy_avx2.cpp: Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4
extern const Registry kKquantAvx2Part;   // kquant_avx2.cpp: Q2_K .. Q6_K
extern const Registry kLowbitAvx2Part;   // lowbit_avx2.cpp: IQ*, TQ1_0, TQ2_0, Q1_0, Q2_0
extern const Registry kFloatAvx512Part;  // kernels_avx512.cpp: F32 F16 BF16
extern const Registry kLegacyAvx512Part; // legacy_avx512.cpp
extern const Registry kKquantAvx512Part; // kquant_avx512.cpp
extern const Registry kLowbitAvx512Part; // lowbit_avx512.cpp: IQ4_NL Q1_0 Q2_0

// ---- generation (used by the ISA translation units) ----

template <class MK>
float vec_dot_of(int64_t n, const void* w_row, const void* act_row) {
  const uint8_t* w = static_cast<const uint8_t*>(w_row);
  const uint8_t* a = static_cast<const uint8_t*>(act_row);
  float out;
  MK::template tile<1, 1>(n, &w, &a, &out);
  return out;
}

// T::kShapeFree, false where T does not say.
template <class T>
constexpr bool shape_free() {
  if constexpr (requires { T::kShapeFree; })
    return T::kShapeFree;
  else
    return false;
}

template <template <class> class Simd, class F>
constexpr void add_weight(Registry& r) {
  static_assert(slot(F::type) < kTypeSlots);
  FormatKernels& k = r[slot(F::type)];
  if constexpr (requires { typename Simd<F>::Mk; }) {
    using MK = typename Simd<F>::Mk;
    k.vec_dot = &vec_dot_of<MK>;
    k.gemm = &tiled::gemm<MK>;
    if constexpr (shape_free<MK>()) k.gemm_exact = k.gemm;
  }
  if constexpr (requires { &Simd<F>::gemm; }) {
    k.gemm = &Simd<F>::gemm;
    k.gemm_exact = shape_free<Simd<F>>() ? k.gemm : nullptr;
  }
  if constexpr (requires { typename Simd<F>::MkExact; }) {
    static_assert(shape_free<typename Simd<F>::MkExact>());
    k.gemm_exact = &tiled::gemm<typename Simd<F>::MkExact>;
  }
  if constexpr (requires { &Simd<F>::gemm_exact; }) k.gemm_exact = &Simd<F>::gemm_exact;
}

template <template <class> class Simd, class F>
constexpr void add_act(Registry& r) {
  static_assert(slot(F::type) < kTypeSlots);
  if constexpr (requires(const float* x, void* y) { Simd<F>::quantize(x, y, int64_t{}); })
    r[slot(F::type)].quantize = &Simd<F>::quantize;
}

template <template <class> class Simd, class... Ws, class... As>
constexpr Registry make_registry(quant::TypeList<Ws...>, quant::TypeList<As...>) {
  Registry r{};
  (add_weight<Simd, Ws>(r), ...);
  (add_act<Simd, As>(r), ...);
  return r;
}

template <template <class> class Simd>
constexpr Registry make_registry() {
  return make_registry<Simd>(quant::WeightFormats{}, quant::ActFormats{});
}

}  // namespace df::cpu
