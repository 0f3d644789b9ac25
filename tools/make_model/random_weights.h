// The random generator of df_make_model: splitmix64 + Box-Muller (portable and identical on
// every platform, unlike std::normal_distribution), one stream per tensor keyed by the seed
// and the tensor's name, so every weight type of one seed is the same model rounded
// differently. Shared by the qwen3 and qwen35 generators.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

namespace df::make_model {

struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  // Box-Muller, one value per call.
  float normal() {
    const double u1 = uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
};

inline uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace df::make_model
