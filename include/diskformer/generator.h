// Generation strategies over the Session step API (append rows -> outputs, rewind).
// PlainGenerator: one token per forward, sampled from the last row's logits; greedy decoding
// takes the argmax on the device and downloads one id per token. (Speculative generation is
// a second strategy over the same API.)
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "diskformer/engine.h"

namespace df {

class PlainGenerator {
 public:
  PlainGenerator(Session& session, const GenerateOptions& opt);
  // Prefills `prompt`, then samples until max_new_tokens, a stop id, the end of the context,
  // or on_token returning false. Returns the generated ids (a stop id is not included).
  // Records the decode statistics in the session.
  std::vector<Token> run(const std::vector<Token>& prompt, const std::function<bool(Token)>& on_token);

 private:
  Session& session_;
  GenerateOptions opt_;
  Sampler sampler_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor best_;  // [1, 1] i32: the device argmax of greedy decoding
};

}  // namespace df
