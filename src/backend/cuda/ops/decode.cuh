// Device decoders of weight rows, 32 elements at a time: Decode<T>::chunk(row, c, out) writes
// elements [32c, 32c + 32) of a row stored in ggml type T (block layouts: src/quant/*.h).
// Used by get_rows, the tiled matmul of larger batches and the simple matvec; the fast decode
// matvec kernels of every format live in matvec/.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "quant/types.h"

namespace df::cuda {

__device__ __forceinline__ float half_at(const uint8_t* p) {  // p 2-byte aligned
  return __half2float(*reinterpret_cast<const __half*>(p));
}

template <GgmlType T>
struct Decode;

template <>
struct Decode<GgmlType::F32> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const float4* p = reinterpret_cast<const float4*>(row) + c * 8;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 v = p[i];
      out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
    }
  }
};

template <>
struct Decode<GgmlType::F16> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const __half2* p = reinterpret_cast<const __half2*>(row) + c * 16;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float2 v = __half22float2(p[i]);
      out[2 * i] = v.x, out[2 * i + 1] = v.y;
    }
  }
};

template <>
struct Decode<GgmlType::BF16> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const __nv_bfloat16* p = reinterpret_cast<const __nv_bfloat16*>(row) + c * 32;
#pragma unroll
    for (int i = 0; i < 32; ++i) out[i] = __bfloat162float(p[i]);
  }
};

// Q8_0: 34-byte blocks {fp16 d, int8 q[32]}: w = d * q
template <>
struct Decode<GgmlType::Q8_0> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* b = row + c * 34;
    const float d = half_at(b);
    const int8_t* q = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]);
  }
};

// Q4_0: 18-byte blocks {fp16 d, 16 bytes of nibbles}: byte j holds element j (low) and j + 16.
template <>
struct Decode<GgmlType::Q4_0> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* b = row + c * 18;
    const float d = half_at(b);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[2 + j];
      out[j] = d * static_cast<float>((q & 15) - 8);
      out[j + 16] = d * static_cast<float>((q >> 4) - 8);
    }
  }
};

// Q4_1: 20-byte blocks {fp16 d, fp16 m, nibbles}: w = d * q + m
template <>
struct Decode<GgmlType::Q4_1> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* b = row + c * 20;
    const float d = half_at(b), m = half_at(b + 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[4 + j];
      out[j] = d * static_cast<float>(q & 15) + m;
      out[j + 16] = d * static_cast<float>(q >> 4) + m;
    }
  }
};

// Q5_0: 22-byte blocks {fp16 d, u32 qh (bit j: fifth bit of element j), nibbles}: w = d * (q - 16)
template <>
struct Decode<GgmlType::Q5_0> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* b = row + c * 22;
    const float d = half_at(b);
    const uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | (static_cast<uint32_t>(b[5]) << 24);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[6 + j];
      const int hi0 = static_cast<int>((qh >> j) & 1) << 4, hi1 = static_cast<int>((qh >> (j + 16)) & 1) << 4;
      out[j] = d * static_cast<float>(((q & 15) | hi0) - 16);
      out[j + 16] = d * static_cast<float>(((q >> 4) | hi1) - 16);
    }
  }
};

// Q5_1: 24-byte blocks {fp16 d, fp16 m, u32 qh, nibbles}: w = d * q + m
template <>
struct Decode<GgmlType::Q5_1> {
  __device__ static void chunk(const uint8_t* row, int64_t c, float* out) {
    const uint8_t* b = row + c * 24;
    const float d = half_at(b), m = half_at(b + 2);
    const uint32_t qh = *reinterpret_cast<const uint32_t*>(b + 4);  // 4-byte aligned: 24c + 4
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = b[8 + j];
      out[j] = d * static_cast<float>((q & 15) | (((qh >> j) & 1) << 4)) + m;
      out[j + 16] = d * static_cast<float>((q >> 4) | (((qh >> (j + 16)) & 1) << 4)) + m;
    }
  }
};

// Calls f(std::integral_constant-like tag) for the runtime type t; false when t has no decoder.
template <class F>
bool with_decoder(GgmlType t, F&& f) {
  switch (t) {
    case GgmlType::F32: f(Decode<GgmlType::F32>{}); return true;
    case GgmlType::F16: f(Decode<GgmlType::F16>{}); return true;
    case GgmlType::BF16: f(Decode<GgmlType::BF16>{}); return true;
    case GgmlType::Q8_0: f(Decode<GgmlType::Q8_0>{}); return true;
    case GgmlType::Q4_0: f(Decode<GgmlType::Q4_0>{}); return true;
    case GgmlType::Q4_1: f(Decode<GgmlType::Q4_1>{}); return true;
    case GgmlType::Q5_0: f(Decode<GgmlType::Q5_0>{}); return true;
    case GgmlType::Q5_1: f(Decode<GgmlType::Q5_1>{}); return true;
    default: return false;
  }
}

}  // namespace df::cuda
