// Small AVX2 helpers shared by the AVX2 and AVX-512 translation units (AVX-512 machines run
// the 256-bit kernels too). Internal linkage on purpose (static): each ISA translation unit
// gets its own copy, compiled with its own flags, so no copy built with AVX-512 encodings
// can be picked by the linker for an AVX2 caller.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace df::cpu::simd {

// The f32 horizontal sum of ggml's hsum_float_8 (the one for 8 lanes, whatever the ISA):
// (v0+v4 + v2+v6) + (v1+v5 + v3+v7).
static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of 8 int32 lanes (exact, wrapping).
static inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// fp16 bits to f32 (vcvtph2ps), and broadcast to 8 lanes.
static inline float fp16(uint16_t h) { return _cvtsh_ss(h); }
static inline __m256 fp16x8(uint16_t h) { return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h))); }

static inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
static inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace df::cpu::simd
