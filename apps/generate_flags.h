// Sampling and generation flags shared by `run` and `chat`.
#pragma once
#include <random>

#include <CLI/CLI.hpp>

#include "diskformer/engine.h"

namespace df::cli {

struct GenerateFlags {
  int64_t n_predict = 128;
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  int64_t seed = -1;  // -1: random
};

inline void add_generate_flags(CLI::App& app, GenerateFlags& g) {
  app.add_option("-n,--n-predict", g.n_predict, "most tokens to generate")->check(CLI::NonNegativeNumber);
  app.add_option("--temp", g.temp, "temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", g.top_k, "top-k (0: off)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", g.top_p, "top-p (1: off)")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", g.min_p, "min-p (0: off)")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("-s,--seed", g.seed, "random seed (-1: random)");
}

inline GenerateOptions to_options(const GenerateFlags& g) {
  GenerateOptions o;
  o.max_new_tokens = g.n_predict;
  o.sampling.temperature = g.temp;
  o.sampling.top_k = g.top_k;
  o.sampling.top_p = g.top_p;
  o.sampling.min_p = g.min_p;
  o.sampling.seed = g.seed < 0 ? std::random_device{}() : static_cast<uint64_t>(g.seed);
  return o;
}

}  // namespace df::cli
