#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace df {

int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int32_t>(best);
}

namespace {

// Softmax of the candidates' logits (already sorted, descending) into p.
template <typename C>
void softmax(std::vector<C>& c, float temperature) {
  const float mx = c.front().logit;
  double sum = 0.0;
  for (auto& x : c) {
    x.p = std::exp((x.logit - mx) / temperature);
    sum += x.p;
  }
  for (auto& x : c) x.p = static_cast<float>(x.p / sum);
}

}  // namespace

int32_t Sampler::sample(const float* logits, int64_t n_vocab) {
  if (opt_.temperature <= 0.0f) return argmax(logits, n_vocab);
  std::vector<Prob>& dist = dist_;
  distribution(logits, n_vocab, dist);
  return draw(dist);
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw(const std::vector<Prob>& dist) {
  const double r = uniform();
  double cum = 0.0;
  for (const auto& c : dist) {
    cum += c.p;
    if (r < cum) return c.id;
  }
  return dist.back().id;
}

void Sampler::distribution(const float* logits, int64_t n_vocab, std::vector<Prob>& out) {
  cand_.resize(static_cast<size_t>(n_vocab));
  for (int64_t i = 0; i < n_vocab; ++i) cand_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  // top-k
  size_t keep = cand_.size();
  if (opt_.top_k > 0 && static_cast<size_t>(opt_.top_k) < keep) keep = static_cast<size_t>(opt_.top_k);
  std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep), cand_.end(), by_logit);
  cand_.resize(keep);
  // top-p: smallest prefix whose probability mass reaches top_p
  if (opt_.top_p < 1.0f) {
    softmax(cand_, 1.0f);
    double cum = 0.0;
    size_t n = 0;
    while (n < cand_.size()) {
      cum += cand_[n].p;
      ++n;
      if (cum >= opt_.top_p) break;
    }
    cand_.resize(std::max<size_t>(1, n));
  }
  // min-p: drop tokens less likely than min_p times the most likely one
  if (opt_.min_p > 0.0f) {
    softmax(cand_, 1.0f);
    const float cut = cand_.front().p * opt_.min_p;
    size_t n = 1;
    while (n < cand_.size() && cand_[n].p >= cut) ++n;
    cand_.resize(n);
  }
  // temperature
  softmax(cand_, std::max(opt_.temperature, 1e-6f));
  out.clear();
  for (const auto& c : cand_) out.push_back({c.id, c.p});
}

}  // namespace df
