// AVX-512 (VNNI) kernels of Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4: block32_mk.h with vpdpbusd for
// the lane sums. Bit-identical to the scalar reference and to ggml's vec_dot.
#include <immintrin.h>

#include "quant/cpu/block32_mk.h"
#include "quant/cpu/registry.h"

namespace df::cpu {
namespace {

struct Ops {
  static __m256i dot4(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
};

// This file's part of the registry (registry.h); activations use the registry's quantisers.
template <class F>
struct Simd {};
template <> struct Simd<quant::FormatQ4_0> { using Mk = block32::Mk<Ops, block32::PQ4_0, 4, 4, 1>; };
template <> struct Simd<quant::FormatQ4_1> { using Mk = block32::Mk<Ops, block32::PQ4_1, 4, 4, 1>; };
template <> struct Simd<quant::FormatQ5_0> { using Mk = block32::Mk<Ops, block32::PQ5_0, 4, 4, 1>; };
template <> struct Simd<quant::FormatQ5_1> { using Mk = block32::Mk<Ops, block32::PQ5_1, 4, 4, 1>; };
template <> struct Simd<quant::FormatMxfp4> { using Mk = block32::Mk<Ops, block32::PMxfp4, 4, 4, 1>; };
template <> struct Simd<quant::FormatNvfp4> { using Mk = block32::Mk<Ops, block32::PNvfp4, 4, 4, 1>; };

}  // namespace

constinit const Registry kLegacyAvx512Part = make_registry<Simd>();

}  // namespace df::cpu
