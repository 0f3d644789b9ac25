// Choosing a request's next token from a row of logits: OpenAI's frequency / presence
// penalties over the tokens generated so far, then the engine's sampler (greedy or
// temperature with top-k / top-p / min-p), and the log-probabilities OpenAI clients ask for.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace df::server {

struct TokenLogprob {
  Token id = 0;
  float logprob = 0.0f;                       // log-softmax of the model's logits (temperature 1)
  std::vector<std::pair<Token, float>> top;   // the most likely tokens, descending (ties: lower id)
};

struct ChoiceOptions {
  SamplerOptions sampling;
  float frequency_penalty = 0.0f;  // subtracted once per earlier occurrence
  float presence_penalty = 0.0f;   // subtracted once if the token occurred
  int top_logprobs = -1;           // -1: no log-probabilities; else how many alternatives
};

class TokenChooser {
 public:
  explicit TokenChooser(const ChoiceOptions& opt);
  // True when the choice needs the logits row on the host (anything but plain greedy).
  bool needs_logits() const;
  bool wants_logprobs() const { return opt_.top_logprobs >= 0; }
  // Picks the next token from logits [n_vocab]; records it for the penalties.
  Token choose(const float* logits, int64_t n_vocab);
  // Records a token chosen elsewhere (greedy argmax done on the device).
  void note(Token t) { ++counts_[t]; }
  // Log-probabilities of `chosen` and the top alternatives in logits [n_vocab].
  TokenLogprob logprobs(const float* logits, int64_t n_vocab, Token chosen) const;

 private:
  ChoiceOptions opt_;
  Sampler sampler_;
  std::unordered_map<Token, int32_t> counts_;  // generated tokens so far
  std::vector<float> work_;
};

}  // namespace df::server
