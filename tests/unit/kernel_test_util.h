// Helpers shared by the kernel tests: random rows, normalised error, available ISAs.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "quant/cpu/kernels.h"

namespace df::test {

// mse(a, b) / mse(a, 0): 0 for identical, ~1 for unrelated vectors.
inline double normalised_error(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(ref[i]) - double(got[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  return den == 0 ? num : num / den;
}

inline std::vector<float> gaussian(std::mt19937& rng, size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Every SIMD ISA this CPU can run (the scalar reference excluded).
inline std::vector<cpu::Isa> simd_isas() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : {cpu::Isa::AVX2, cpu::Isa::AVX512})
    if (static_cast<int>(isa) <= static_cast<int>(cpu::best_isa())) out.push_back(isa);
  return out;
}

inline constexpr GgmlType kKernelTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                            GgmlType::Q8_0};

}  // namespace df::test
