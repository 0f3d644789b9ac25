#include "server/token_choice.h"

#include <algorithm>
#include <cmath>

namespace df::server {

TokenChooser::TokenChooser(const ChoiceOptions& opt) : opt_(opt), sampler_(opt.sampling) {}

bool TokenChooser::needs_logits() const {
  return opt_.sampling.temperature > 0.0f || opt_.frequency_penalty != 0.0f || opt_.presence_penalty != 0.0f ||
         opt_.top_logprobs >= 0;
}

Token TokenChooser::choose(const float* logits, int64_t n_vocab) {
  const float* row = logits;
  if ((opt_.frequency_penalty != 0.0f || opt_.presence_penalty != 0.0f) && !counts_.empty()) {
    work_.assign(logits, logits + n_vocab);
    for (const auto& [t, n] : counts_)
      if (t >= 0 && t < n_vocab)
        work_[static_cast<size_t>(t)] -= static_cast<float>(n) * opt_.frequency_penalty + opt_.presence_penalty;
    row = work_.data();
  }
  const Token t = sampler_.sample(row, n_vocab);
  ++counts_[t];
  return t;
}

TokenLogprob TokenChooser::logprobs(const float* logits, int64_t n_vocab, Token chosen) const {
  // log p_i = l_i - max - log(sum exp(l_j - max)), in double for the sum.
  float mx = logits[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const double lse = static_cast<double>(mx) + std::log(sum);
  auto lp = [&](Token t) { return static_cast<float>(static_cast<double>(logits[t]) - lse); };
  TokenLogprob out;
  out.id = chosen;
  out.logprob = lp(chosen);
  const auto k = static_cast<size_t>(std::min<int64_t>(std::max(opt_.top_logprobs, 0), n_vocab));
  if (k > 0) {
    std::vector<Token> ids(static_cast<size_t>(n_vocab));
    for (int64_t i = 0; i < n_vocab; ++i) ids[static_cast<size_t>(i)] = static_cast<Token>(i);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](Token a, Token b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], lp(ids[i]));
  }
  return out;
}

}  // namespace df::server
