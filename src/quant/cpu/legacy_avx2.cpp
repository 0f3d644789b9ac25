// AVX2 kernels of Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4: block32_mk.h with vpmaddubsw + vpmaddwd for
// the lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include "quant/cpu/block32_mk.h"
#include "quant/cpu/registry.h"

namespace df::cpu {
namespace {

struct Ops {
  // u <= 31 for every format here, |s| <= 127: pair sums cannot saturate (2 * 31 * 127 < 32767)
  static __m256i dot4(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
  }
};

// This file's part of the registry (registry.h); activations use the registry's quantisers.
template <class F>
struct Simd {};
template <> struct Simd<quant::FormatQ4_0> { using Mk = block32::Mk<Ops, block32::PQ4_0, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ4_1> { using Mk = block32::Mk<Ops, block32::PQ4_1, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ5_0> { using Mk = block32::Mk<Ops, block32::PQ5_0, 2, 4, 1>; };
template <> struct Simd<quant::FormatQ5_1> { using Mk = block32::Mk<Ops, block32::PQ5_1, 2, 4, 1>; };
template <> struct Simd<quant::FormatMxfp4> { using Mk = block32::Mk<Ops, block32::PMxfp4, 2, 4, 1>; };
template <> struct Simd<quant::FormatNvfp4> { using Mk = block32::Mk<Ops, block32::PNvfp4, 2, 4, 1>; };

}  // namespace

constinit const Registry kLegacyAvx2Part = make_registry<Simd>();

}  // namespace df::cpu
