// The random generator of df_make_model: splitmix64 + Box-Muller (portable and identical on
// every platform, unlike std::normal_distribution), one stream per tensor keyed by the seed
// and the tensor's name, so every weight type of one seed is the same model rounded
// differently. Shared by the qwen3 and qwen35 generators.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <thread>
#include <vector>

#include "quant/cpu/kernels.h"
#include "quant/types.h"

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
  // Moves the stream `draws` calls of next() ahead (splitmix64's state is a counter).
  void skip(uint64_t draws) { state += draws * 0x9E3779B97F4A7C15ull; }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  // Box-Muller, one value per call.
  float normal() {
    const double u1 = uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
  }
  // A cheap stand-in for N(0, 1): (popcount of 64 random bits - 32) / 4 (mean 0, variance 1,
  // steps of 1/4 in [-8, 8]), one draw per value; ~5x faster than normal() with its rounding.
  float normal_fast() { return static_cast<float>(std::popcount(next()) - 32) * 0.25f; }
};

inline uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A [rows, cols] matrix with entries sigma * N(0, 1) drawn from the stream `stream_seed`
// (row-major, every value two draws; fast: Rng::normal_fast, one draw), each row rounded to type t. Rows are made on every
// hardware thread, each block of rows jumping the stream to its first value, so the bytes are
// those of the sequential loop; the real-shape presets (15 GB) need the speed.
inline std::vector<uint8_t> random_matrix(uint64_t stream_seed, float sigma, GgmlType t, int64_t cols, int64_t rows,
                                          bool fast = false) {
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
  auto run = [&](int64_t r0, int64_t r1) {
    Rng rng(stream_seed);
    rng.skip((fast ? 1 : 2) * static_cast<uint64_t>(cols) * static_cast<uint64_t>(r0));
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      for (auto& x : row) x = sigma * (fast ? rng.normal_fast() : rng.normal());
      cpu::quantize_row_ref(t, row.data(), data.data() + rb * static_cast<size_t>(r), cols);
    }
  };
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(std::thread::hardware_concurrency(),
                                                                  cols * rows / (1 << 20)));
  if (threads == 1) {
    run(0, rows);
    return data;
  }
  std::vector<std::thread> pool;
  const int64_t per = (rows + threads - 1) / threads;
  for (int64_t i = 0; i < threads; ++i) {
    const int64_t r0 = i * per, r1 = std::min(rows, r0 + per);
    if (r0 < r1) pool.emplace_back(run, r0, r1);
  }
  for (auto& th : pool) th.join();
  return data;
}

}  // namespace df::make_model
