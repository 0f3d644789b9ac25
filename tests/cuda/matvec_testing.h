// Shared by the CUDA matvec test and workbench: random ggml blocks with valid scales (every
// bit pattern of the quants, finite fp16 / E8M0 / UE4M3 scales), the CPU reference (src/quant
// dequantize_ref, then an f64 dot) and the normalised error.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/formats.h"

namespace df::cudamv::testing {

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {  // xorshift64*
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f; }
};

// The 28 weight formats of the CPU engine.
inline const std::vector<GgmlType>& all_weight_types() {
  static const std::vector<GgmlType> v = {
      GgmlType::F32,     GgmlType::F16,    GgmlType::BF16,   GgmlType::Q4_0,    GgmlType::Q4_1,   GgmlType::Q5_0,
      GgmlType::Q5_1,    GgmlType::Q8_0,   GgmlType::Q2_K,   GgmlType::Q3_K,    GgmlType::Q4_K,   GgmlType::Q5_K,
      GgmlType::Q6_K,    GgmlType::IQ1_S,  GgmlType::IQ1_M,  GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ2_S,
      GgmlType::IQ3_XXS, GgmlType::IQ3_S,  GgmlType::IQ4_NL, GgmlType::IQ4_XS,  GgmlType::TQ1_0,  GgmlType::TQ2_0,
      GgmlType::Q1_0,    GgmlType::Q2_0,   GgmlType::MXFP4,  GgmlType::NVFP4};
  return v;
}

// Offsets of the fp16 scale fields in a block (the other bytes are quants: any pattern).
inline std::vector<int> fp16_scale_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    case GgmlType::TQ1_0: return {52};
    case GgmlType::TQ2_0: return {64};
    case GgmlType::IQ1_M: case GgmlType::MXFP4: case GgmlType::NVFP4: return {};
    default: return {0};
  }
}

// rows x row_bytes(t, cols) bytes of random blocks.
inline std::vector<uint8_t> random_blocks(GgmlType t, int64_t cols, int64_t rows, uint64_t seed) {
  Rng rng(seed);
  const size_t rb = row_bytes(t, cols), total = rb * static_cast<size_t>(rows);
  std::vector<uint8_t> out(total);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    const int64_t n = cols * rows;
    for (int64_t i = 0; i < n; ++i) {
      const float v = rng.uniform(-1.0f, 1.0f);
      if (t == GgmlType::F32) {
        std::memcpy(out.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = t == GgmlType::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
    }
    return out;
  }
  for (size_t i = 0; i + 8 <= total; i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(out.data() + i, &r, 8);
  }
  for (size_t i = total & ~size_t{7}; i < total; ++i) out[i] = static_cast<uint8_t>(rng.next());
  const auto info = type_info(t);
  const size_t bb = info.block_bytes;
  const std::vector<int> offs = fp16_scale_offsets(t);
  for (size_t b = 0; b < total / bb; ++b) {
    uint8_t* blk = out.data() + b * bb;
    for (size_t k = 0; k < offs.size(); ++k) {
      // scale in [2^-8, 2^-6); a min field (second offset of Q4_1 / Q5_1) may be negative
      float v = rng.uniform(0.5f, 1.0f) * 0x1p-6f;
      if (k == 1 && (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) && (rng.next() & 1)) v = -v;
      const uint16_t h = fp32_to_fp16(v);
      std::memcpy(blk + offs[k], &h, 2);
    }
    if (t == GgmlType::IQ1_M) {  // fp16 d spread over the top nibbles of the 4 scale words
      const uint16_t h = fp32_to_fp16(rng.uniform(0.5f, 1.0f) * 0x1p-6f);
      for (int i = 0; i < 4; ++i) {
        uint16_t sc;
        std::memcpy(&sc, blk + 48 + 2 * i, 2);
        sc = static_cast<uint16_t>((sc & 0x0fff) | (((h >> (4 * i)) & 0xf) << 12));
        std::memcpy(blk + 48 + 2 * i, &sc, 2);
      }
    }
    if (t == GgmlType::MXFP4) blk[0] = static_cast<uint8_t>(120 + rng.next() % 10);  // 2^-8 .. 2^1
  }
  return out;
}

// The CPU reference dequantization of rows x cols.
inline std::vector<float> dequant_rows(GgmlType t, const uint8_t* blocks, int64_t cols, int64_t rows) {
  std::vector<float> out(static_cast<size_t>(cols * rows));
  quant::visit_format(quant::WeightFormats{}, t, [&](auto f) {
    using F = decltype(f);
    const int64_t nb = cols * rows / F::block_elems;
    F::dequantize_ref(reinterpret_cast<const typename F::Block*>(blocks), out.data(), nb);
  });
  return out;
}

inline std::vector<float> random_x(int64_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  return x;
}

// ref[j * rows + r] = sum_c w[r, c] * x[j, c] in f64, for rows [r0, r1).
inline std::vector<double> reference(const std::vector<float>& w, const std::vector<float>& x, int64_t cols,
                                     int64_t rows, int n, int64_t r0 = 0, int64_t r1 = -1) {
  if (r1 < 0) r1 = rows;
  std::vector<double> y(static_cast<size_t>(n * rows), 0.0);
  for (int j = 0; j < n; ++j)
    for (int64_t r = r0; r < r1; ++r) {
      const float* wr = w.data() + r * cols;
      const float* xj = x.data() + j * cols;
      double s = 0.0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(wr[c]) * xj[c];
      y[static_cast<size_t>(j * rows + r)] = s;
    }
  return y;
}

// mse(a, ref) / mse(ref, 0) over the given entries; NaN / inf give +inf.
inline double nmse(const float* a, const double* ref, size_t count) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    const double d = a[i] - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0.0 ? num / den : num;
}

}  // namespace df::cudamv::testing
