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

// Greedy decode steps over the Session step API: each step appends one id, takes the argmax
// of its logits on the device and reads that one id back.
//
// With lookahead (EngineOptions::decode_lookahead), next() queues the step that appends the
// id it is about to return before the host waits for that id: the queued step reads the id
// on the device (AppendOptions::ids_from), so the device runs step k + 1 while the host reads
// and handles the id of step k. Tokens and logits are those of plain steps (the same rows,
// the same kernels). The caller says in next() whether it will append the returned id as
// far as it can know before seeing it (the token budget, the context); when it then does not
// (a stop id, a callback's stop), drop_queued() undoes the queued step: pure-attention
// models rewind their KV cache; hybrid models cannot rewind one step without a replay, so
// the session keeps that id consumed (it is in Session::tokens()).
class GreedySteps {
 public:
  explicit GreedySteps(Session& session);
  GreedySteps(Session& session, bool lookahead);
  ~GreedySteps();  // waits for a queued step's read (its host memory goes with the reader)
  GreedySteps(const GreedySteps&) = delete;
  GreedySteps& operator=(const GreedySteps&) = delete;
  // Appends t at position() and returns the greedy id after it. After a next() that queued
  // a step, t must be the id it returned (that step already appends it).
  // then_append: the caller will append the returned id unless the id itself says otherwise.
  Token next(Token t, bool then_append);
  // The id returned last will not be appended: undoes the step queued for it, if any.
  void drop_queued();
  // The session's position without a queued step.
  int64_t position() const { return session_.position() - (queued_ ? 1 : 0); }
  bool lookahead() const { return lookahead_; }

 private:
  Session& session_;
  bool lookahead_ = false;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor best_[2];                            // [1, 1] i32: the device argmax of two steps in flight
  std::unique_ptr<HostReader> reader_[2];
  int cur_ = 0;         // best_[cur_]: the argmax of the step that appended the last next()'s t
  bool queued_ = false;  // a step appending the id returned last is queued
  Token queued_id_ = 0;
};

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
};

}  // namespace df
