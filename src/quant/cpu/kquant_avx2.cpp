// AVX2 kernels of the K-quants: kquant_mk.h with vpmaddubsw + vpmaddwd
// for the scaled lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include "quant/cpu/registry.h"
#include "quant/cpu/kquant_mk.h"

namespace df::cpu {
namespace {

struct Ops {
  // pair products cannot saturate (2 * 63 * 127 < 32767)
  static __m256i acc_scaled(__m256i acc, __m256i u, __m256i a, __m256i s16) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), s16));
  }
};

// This file's part of the registry (registry.h); activations use the registry's quantisers.
template <class F>
struct Simd {};
template <> struct Simd<quant::FormatQ2_K> { using Mk = kquant::Mk<Ops, kquant::PQ2_K, 1, 4, 1>; };
template <> struct Simd<quant::FormatQ3_K> { using Mk = kquant::Mk<Ops, kquant::PQ3_K, 1, 4, 1>; };
template <> struct Simd<quant::FormatQ4_K> { using Mk = kquant::Mk<Ops, kquant::PQ4_K, 1, 4, 1>; };
template <> struct Simd<quant::FormatQ5_K> { using Mk = kquant::Mk<Ops, kquant::PQ5_K, 1, 4, 1>; };
template <> struct Simd<quant::FormatQ6_K> { using Mk = kquant::Mk<Ops, kquant::PQ6_K, 1, 4, 1>; };

}  // namespace

constinit const Registry kKquantAvx2Part = make_registry<Simd>();

}  // namespace df::cpu
