// Device helpers shared by the matvec kernels: the IQ tables as one device struct, scalar
// conversions with src/quant's exact semantics, small unaligned loads.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

namespace df::cudamv {

// The IQ formats' constant tables (copies of src/quant/iq_tables.h), uploaded by Context.
struct DevTables {
  uint64_t iq2xxs[256];
  uint64_t iq2xs[512];
  uint64_t iq2s[1024];
  uint64_t iq1s[2048];
  uint32_t iq3xxs[256];
  uint32_t iq3s[512];
  uint8_t signs[128];   // kIq2xsSigns
  int8_t iq4nl[16];     // kIq4nlValues
};

// The weight: rows x q_row_bytes quant plane (raw blocks or planar words), rows x m_row_bytes
// meta plane (planar formats).
struct PlanarView {
  const uint8_t* q;
  const uint8_t* m;
  size_t q_row_bytes, m_row_bytes;
  int64_t rows, cols;
  const DevTables* tables;
};

// __host__ __device__: the int8-x part dots (dev_i8_*.cuh) also run on the CPU in a test.
__host__ __device__ __forceinline__ float bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
__host__ __device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf2f(uint16_t h) { return __uint_as_float(uint32_t{h} << 16); }
__host__ __device__ __forceinline__ float i2f(int v) {
#ifdef __CUDA_ARCH__
  return __int2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}

// 2-byte aligned loads (raw ggml blocks are only 2-byte aligned).
__host__ __device__ __forceinline__ uint16_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__host__ __device__ __forceinline__ uint32_t ld_u32_a2(const uint8_t* p) {
  return uint32_t{ld_u16(p)} | (uint32_t{ld_u16(p + 2)} << 16);
}

// E8M0 scale halved (src/quant/ggml_scalar.h e8m0_to_fp32_half).
__host__ __device__ __forceinline__ float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return bits_f32(bits);
}
// UE4M3 scale halved (ggml_scalar.h ue4m3_to_fp32_half).
__host__ __device__ __forceinline__ float ue4m3_half(uint8_t x) {
  if (x == 0x7fu) return 0.0f;
  const uint32_t v = x & 0x7fu;
#ifdef __CUDA_ARCH__
  if (v < 8) return __fmul_rn(static_cast<float>(v), 0x1p-10f);
#else
  if (v < 8) return static_cast<float>(v) * 0x1p-10f;
#endif
  return bits_f32((v << 20) + (119u << 23));
}

__device__ __forceinline__ int byte_of(uint64_t g, int j) { return static_cast<int>((g >> (8 * j)) & 0xff); }
__device__ __forceinline__ int byte_of(uint32_t g, int j) { return static_cast<int>((g >> (8 * j)) & 0xff); }

// Streaming 16-byte load of weights (read once: keep them out of L1).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

}  // namespace df::cudamv
