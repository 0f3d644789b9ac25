// The int8-x part dots over raw blocks (matvec/dev_i8_basic.cuh, dev_i8_iq.cuh) run on the CPU
// (they are __host__ __device__; no GPU needed, so CI runs this): for every format, random
// blocks (every quant bit pattern, finite scales) against the f64 sum of the exactly
// dequantized weights (src/quant dequantize_ref) times the int8 x they are given (q d per
// 32-block, in the xq.cuh layout), two x rows at once (dot<2>), each row's sum within 1e-6 of
// the sum of the products' magnitudes. The GPU test (test_matvec_cuda.cpp) then checks the
// kernels around them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/matvec/dev_i8_iq.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "matvec_testing.h"
#include "quant/formats_fp4.h"
#include "quant/iq_tables.h"

namespace df::cudamv {
namespace {

template <class R>
void check_format(uint64_t seed) {
  SCOPED_TRACE(type_name(R::kType));
  constexpr int64_t cols = 1024, rows = 6;
  constexpr int P = R::kPartElems;
  const int64_t nparts = cols / P, rb = xq_row_bytes(cols);
  static DevTables T;
  fill_tables(T);
  const auto blocks = testing::random_blocks(R::kType, cols, rows, seed);
  const auto w = testing::dequant_rows(R::kType, blocks.data(), cols, rows);
  // Two x rows: int8 q, a scale per 32 (per 256 for Q8_K, as the kernels' rounding gives), the
  // 16-element sums.
  testing::Rng rng(seed + 7);
  std::vector<int4> xbuf(static_cast<size_t>(2 * rb / 16 + 1));
  uint8_t* xq = reinterpret_cast<uint8_t*>(xbuf.data());
  std::vector<double> xv(static_cast<size_t>(2 * cols));
  for (int j = 0; j < 2; ++j) {
    uint8_t* row = xq + j * rb;
    float d = 0.0f;
    for (int64_t b = 0; b < cols / 32; ++b) {
      if (!R::kQ8K || b % 8 == 0) d = rng.uniform(0.5f, 1.0f) * 0x1p-7f;
      int s[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        const int64_t e = 32 * b + i;
        const int q = static_cast<int>(rng.next() % 255) - 127;
        s[i / 16] += q;
        row[((e % P) / 16 * nparts + e / P) * 16 + e % 16] = static_cast<uint8_t>(static_cast<int8_t>(q));
        xv[static_cast<size_t>(j * cols + e)] = static_cast<double>(d) * q;
      }
      const int32_t meta[2] = {0, static_cast<int32_t>((static_cast<uint32_t>(s[0]) & 0xffffu) | (static_cast<uint32_t>(s[1]) << 16))};
      std::memcpy(row + cols + 8 * b, &d, 4);
      std::memcpy(row + cols + 8 * b + 4, &meta[1], 4);
    }
  }
  const size_t wb = row_bytes(R::kType, cols);
  std::vector<int4> wbuf(wb / 16 + 2);  // one row, 16-byte aligned as on the device
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(wbuf.data(), blocks.data() + wb * r, wb);
    const uint8_t* wr = reinterpret_cast<const uint8_t*>(wbuf.data());
    double got[2] = {0.0, 0.0};
    for (int64_t t = 0; t < nparts; ++t) {
      typename R::Part p;
      R::load(wr + (t / R::kParts) * R::kBlockBytes, static_cast<int>(t % R::kParts), p);
      const XQ xa{xq + t * 16, xq + cols + (t * P / 32) * 8, static_cast<int>(rb), static_cast<int>(nparts * 16)};
      float acc[2] = {0.0f, 0.0f};
      R::template dot<2>(p, &T, xa, acc);
      got[0] += acc[0], got[1] += acc[1];
    }
    for (int j = 0; j < 2; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int64_t c = 0; c < cols; ++c) {
        const double pr = static_cast<double>(w[static_cast<size_t>(r * cols + c)]) * xv[static_cast<size_t>(j * cols + c)];
        ref += pr, mag += std::fabs(pr);
      }
      EXPECT_LE(std::fabs(got[j] - ref), 1e-6 * mag) << "row " << r << " x row " << j << ": " << got[j] << " vs " << ref;
    }
  }
}

TEST(MatvecI8Host, PartDotsMatchTheCpuDequantization) {
  check_format<i8::Q2_K>(1);
  check_format<i8::Q3_K>(2);
  check_format<i8::IQ4_NL>(3);
  check_format<i8::Mxfp4>(4);
  check_format<i8::Nvfp4>(5);
  check_format<i8::Q1_0>(6);
  check_format<i8::Q2_0>(7);
  check_format<i8::TQ2_0>(8);
  check_format<i8::TQ1_0>(16);
  check_format<i8::IQ2_XXS>(9);
  check_format<i8::IQ2_XS>(10);
  check_format<i8::IQ2_S>(11);
  check_format<i8::IQ3_XXS>(12);
  check_format<i8::IQ3_S>(13);
  check_format<i8::IQ1_S>(14);
  check_format<i8::IQ1_M>(15);
}

// The value tables written as int8 words in dev_i8_basic.cuh are src/quant's.
TEST(MatvecI8Host, TableWordsAreTheQuantTables) {
  const uint32_t nl[4] = {i8::kNl0, i8::kNl1, i8::kNl2, i8::kNl3}, fp[4] = {i8::kFp0, i8::kFp1, i8::kFp2, i8::kFp3};
  for (int e = 0; e < 16; ++e) {
    EXPECT_EQ(static_cast<int8_t>(nl[e / 4] >> (8 * (e % 4))), quant::kIq4nlValues[e]) << e;
    EXPECT_EQ(static_cast<int8_t>(fp[e / 4] >> (8 * (e % 4))), quant::kValuesFp4[e]) << e;
  }
}

// The unaligned word loader reads the same bytes at every offset.
TEST(MatvecI8Host, UnalignedWordsAreTheBytes) {
  alignas(16) uint8_t buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = static_cast<uint8_t>(37 * i + 11);
  for (int off = 0; off < 16; ++off) {
    uint32_t w[5];
    i8::ldw(buf + off, w);
    for (int k = 0; k < 5; ++k) {
      uint32_t ref;
      std::memcpy(&ref, buf + off + 4 * k, 4);
      EXPECT_EQ(w[k], ref) << "offset " << off << " word " << k;
    }
  }
}

}  // namespace
}  // namespace df::cudamv
