// Helpers of the int8-x kernels over raw ggml blocks (dev_i8_basic.cuh, dev_i8_iq.cuh), all
// __host__ __device__: the device intrinsics (dp4a, byte permute, per-byte subtract, funnel
// shift) with host versions of the same results, so that the formats' part dots run on the
// CPU too (tests/cuda/test_i8raw_host.cu checks every format there, no GPU needed).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/matvec/xq.cuh"

namespace df::cudamv::i8 {

// sum over k of byte k of a times byte k of b (both signed) plus c.
__host__ __device__ __forceinline__ int dp4a(uint32_t a, uint32_t b, int c) {
#ifdef __CUDA_ARCH__
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int k = 0; k < 4; ++k)
    c += static_cast<int>(static_cast<int8_t>(a >> (8 * k))) * static_cast<int>(static_cast<int8_t>(b >> (8 * k)));
  return c;
#endif
}

// Byte i of the result: byte ((s >> 4 i) & 7) of the 8 bytes {b, a} (a bytes 0..3).
__host__ __device__ __forceinline__ uint32_t perm(uint32_t a, uint32_t b, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(a, b, s);
#else
  const uint64_t ab = uint64_t{a} | (uint64_t{b} << 32);
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((ab >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
#endif
}

// Per byte a - b (mod 256, no borrow between bytes).
__host__ __device__ __forceinline__ uint32_t vsub4(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  return __vsub4(a, b);
#else
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= ((((a >> (8 * i)) & 0xff) - ((b >> (8 * i)) & 0xff)) & 0xff) << (8 * i);
  return r;
#endif
}

// Bits 0..3 of `bits` as byte masks (bit k set -> byte k 0xff).
__host__ __device__ __forceinline__ uint32_t mask4(uint32_t bits) { return (((bits & 0xfu) * 0x00204081u) & 0x01010101u) * 0xffu; }
// Bits 0..3 of `bits` as bytes 0 / 1.
__host__ __device__ __forceinline__ uint32_t ones4(uint32_t bits) { return ((bits & 0xfu) * 0x00204081u) & 0x01010101u; }
// Bytes of v negated where m is 0xff (v's bytes < 128).
__host__ __device__ __forceinline__ uint32_t signed4(uint32_t v, uint32_t m) { return vsub4(v ^ m, m); }

// K little-endian words of the bytes at p (any alignment): K + 1 aligned 4-byte loads (the
// last only when p is unaligned, so nothing past p + 4K is read), funnel-shifted.
template <int K>
__host__ __device__ __forceinline__ void ldw(const uint8_t* p, uint32_t (&w)[K]) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint32_t* base = reinterpret_cast<const uint32_t*>(a & ~uintptr_t{3});
  const unsigned sh = static_cast<unsigned>(a & 3) * 8;
  uint32_t prev = base[0];
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const uint32_t next = i + 1 < K || sh ? base[i + 1] : 0u;
#ifdef __CUDA_ARCH__
    w[i] = __funnelshift_r(prev, next, sh);
#else
    w[i] = sh ? (prev >> sh) | (next << (32 - sh)) : prev;
#endif
    prev = next;
  }
}

// 16-entry int8 table lookup (the table as 4 words t0..t3, entry e in byte e % 4 of t[e / 4]):
// lo = the values of the low nibbles of w's bytes 0..3, hi = of the high nibbles.
__host__ __device__ __forceinline__ void lut16(uint32_t w, uint32_t t0, uint32_t t1, uint32_t t2, uint32_t t3, uint32_t& lo,
                                               uint32_t& hi) {
  const uint32_t sel = 0x32103210u | ((w & 0x88888888u) >> 1);
  uint32_t v[2];
#pragma unroll
  for (int g = 0; g < 2; ++g) {
    const uint32_t a = perm(t0, t1, w >> (16 * g)), b = perm(t2, t3, w >> (16 * g));
    v[g] = perm(a, b, sel >> (16 * g));
  }
  lo = perm(v[0], v[1], 0x6420);
  hi = perm(v[0], v[1], 0x7531);
}

// Bytes 0..3 of w spread: element 4 k + i of 16 2-bit values -> byte i of the k-th word.
__host__ __device__ __forceinline__ uint32_t spread2(uint32_t byte) {
  return (byte | (byte << 6) | (byte << 12) | (byte << 18)) & 0x03030303u;
}

// The int8 sums of 8 value words (elements 4 k .. 4 k + 3 in word k) with row j of x:
// elements 0..15 and 16..31.
struct Sums2 {
  int lo, hi;
};
__host__ __device__ __forceinline__ Sums2 dot32(const uint32_t (&v)[8], const XQ& xa, int j) {
  const int4 x0 = xa.word(j, 0), x1 = xa.word(j, 1);
  int lo = dp4a(v[0], static_cast<uint32_t>(x0.x), 0);
  lo = dp4a(v[1], static_cast<uint32_t>(x0.y), lo);
  lo = dp4a(v[2], static_cast<uint32_t>(x0.z), lo);
  lo = dp4a(v[3], static_cast<uint32_t>(x0.w), lo);
  int hi = dp4a(v[4], static_cast<uint32_t>(x1.x), 0);
  hi = dp4a(v[5], static_cast<uint32_t>(x1.y), hi);
  hi = dp4a(v[6], static_cast<uint32_t>(x1.z), hi);
  hi = dp4a(v[7], static_cast<uint32_t>(x1.w), hi);
  return {lo, hi};
}

// Sums of x row j over the part's 8-element groups (elements 8 l .. 8 l + 7).
__host__ __device__ __forceinline__ void xsum8(const XQ& xa, int j, int (&s)[4]) {
  const int4 x0 = xa.word(j, 0), x1 = xa.word(j, 1);
  constexpr uint32_t k1 = 0x01010101u;
  s[0] = dp4a(k1, static_cast<uint32_t>(x0.y), dp4a(k1, static_cast<uint32_t>(x0.x), 0));
  s[1] = dp4a(k1, static_cast<uint32_t>(x0.w), dp4a(k1, static_cast<uint32_t>(x0.z), 0));
  s[2] = dp4a(k1, static_cast<uint32_t>(x1.y), dp4a(k1, static_cast<uint32_t>(x1.x), 0));
  s[3] = dp4a(k1, static_cast<uint32_t>(x1.w), dp4a(k1, static_cast<uint32_t>(x1.z), 0));
}

}  // namespace df::cudamv::i8
