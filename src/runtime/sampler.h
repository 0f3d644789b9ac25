// Token sampling: greedy (argmax, lowest index on ties) or temperature sampling after the
// top-k -> top-p -> min-p filters, in llama.cpp's default order.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace df {

struct SamplerOptions {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 40;        // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  uint64_t seed = 0;
};

// Index of the largest value; the lowest index wins a tie.
int32_t argmax(const float* logits, int64_t n);

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& opt) : opt_(opt), rng_(opt.seed) {}
  int32_t sample(const float* logits, int64_t n_vocab);
  const SamplerOptions& options() const { return opt_; }

  // The distribution sample() draws from (temperature > 0): the tokens that survive top-k,
  // top-p and min-p with their tempered probabilities (summing to 1), most likely first.
  struct Prob {
    int32_t id;
    float p;
  };
  void distribution(const float* logits, int64_t n_vocab, std::vector<Prob>& out);
  // One draw from a distribution like distribution()'s (probabilities summing to ~1).
  int32_t draw(const std::vector<Prob>& dist);
  // A uniform number in [0, 1) from the sampler's generator (speculative acceptance).
  double uniform();

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplerOptions opt_;
  std::mt19937_64 rng_;
  std::vector<Candidate> cand_;
  std::vector<Prob> dist_;
};

}  // namespace df
