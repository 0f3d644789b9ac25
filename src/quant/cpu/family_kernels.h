// Kernels of weight formats that live in their family's own translation units rather than
// in kernels_<isa>.cpp: for each family and ISA a class template whose members are defined
// (and explicitly instantiated for the family's formats) in one ISA translation unit:
//   legacy_avx2.cpp / legacy_avx512.cpp   Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4
//   kquant_avx2.cpp / kquant_avx512.cpp   Q2_K Q3_K Q4_K Q5_K Q6_K
// The kernels_<isa>.cpp registries forward to them (their Simd<F> derives from these).
// Every member has the semantics of the matching Kernels entry (kernels.h), for one format,
// with shapes already checked.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "quant/formats.h"

namespace df::cpu {

template <class F, class... Fs>
inline constexpr bool kIsOneOf = (std::is_same_v<F, Fs> || ...);

template <class F>
inline constexpr bool kLegacyFamily = kIsOneOf<F, quant::FormatQ4_0, quant::FormatQ4_1, quant::FormatQ5_0,
                                               quant::FormatQ5_1, quant::FormatMxfp4, quant::FormatNvfp4>;
template <class F>
inline constexpr bool kKquantFamily = kIsOneOf<F, quant::FormatQ2_K, quant::FormatQ3_K, quant::FormatQ4_K,
                                               quant::FormatQ5_K, quant::FormatQ6_K>;

template <class F>
struct LegacyAvx2 {
  static void quantize_act(const float* x, void* out, int64_t n);
  static float vec_dot(int64_t n, const void* w_row, const void* act_row);
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};
template <class F>
struct LegacyAvx512 {
  static void quantize_act(const float* x, void* out, int64_t n);
  static float vec_dot(int64_t n, const void* w_row, const void* act_row);
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};
template <class F>
struct KquantAvx2 {
  static void quantize_act(const float* x, void* out, int64_t n);
  static float vec_dot(int64_t n, const void* w_row, const void* act_row);
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};
template <class F>
struct KquantAvx512 {
  static void quantize_act(const float* x, void* out, int64_t n);
  static float vec_dot(int64_t n, const void* w_row, const void* act_row);
  static void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};

}  // namespace df::cpu
