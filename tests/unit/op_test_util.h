// Shared helpers of the CPU op tests: normalised error, seeded random data, f32 views, and
// the instruction sets this machine can run.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace df::optest {

// mse(ref, got) / mse(ref, 0)
inline double nerr(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (static_cast<double>(ref[i]) - got[i]) * (static_cast<double>(ref[i]) - got[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The vector as a dense f32 tensor of rows of `cols` elements.
inline Tensor view(std::vector<float>& v, int64_t cols) {
  Tensor t;
  t.data = v.data();
  t.type = GgmlType::F32;
  t.cols = cols;
  t.rows = static_cast<int64_t>(v.size()) / cols;
  t.stride = static_cast<size_t>(cols) * sizeof(float);
  return t;
}

// The vector as an i32 tensor of rows of `cols` elements: [n, 1] token ids or positions,
// [n, k] expert ids.
inline Tensor view_i32(std::vector<int32_t>& v, int64_t cols = 1) {
  Tensor t;
  t.data = v.data();
  t.type = GgmlType::I32;
  t.cols = cols;
  t.rows = static_cast<int64_t>(v.size()) / cols;
  t.stride = static_cast<size_t>(cols) * sizeof(int32_t);
  return t;
}

// Positions p0 .. p0 + n - 1.
inline std::vector<int32_t> positions(int64_t p0, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(p0 + i);
  return p;
}

inline std::vector<cpu::Isa> isas() {
  std::vector<cpu::Isa> out = {cpu::Isa::SCALAR};
  if (cpu::best_isa() >= cpu::Isa::AVX2) out.push_back(cpu::Isa::AVX2);
  if (cpu::best_isa() >= cpu::Isa::AVX512) out.push_back(cpu::Isa::AVX512);
  return out;
}

}  // namespace df::optest
