#include "diskformer/generator.h"

#include <chrono>
#include <optional>

namespace df {
namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace

PlainGenerator::PlainGenerator(Session& session, const GenerateOptions& opt)
    : session_(session), opt_(opt), sampler_(opt.sampling) {}

std::vector<Token> PlainGenerator::run(const std::vector<Token>& prompt, const std::function<bool(Token)>& on_token) {
  const bool greedy = opt_.sampling.temperature <= 0.0f;
  const Tokenizer& tok = session_.engine().tokenizer();
  const int64_t n_vocab = session_.engine().info().n_vocab;
  std::vector<Token> out;
  const std::vector<float>& first = session_.prefill(prompt, opt_.checkpoint_at);
  Token t = sampler_.sample(first.data(), n_vocab);
  std::optional<GreedySteps> steps;  // greedy: the argmax on the device, one id comes back
  if (greedy) steps.emplace(session_);
  session_.set_decode_stats(0, 0.0);
  const double t0 = now_seconds();
  std::vector<float> logits;
  while (static_cast<int64_t>(out.size()) < opt_.max_new_tokens) {
    if (opt_.stop_at_eog && tok.is_stop(t)) break;
    out.push_back(t);
    session_.set_decode_stats(static_cast<int64_t>(out.size()), now_seconds() - t0);
    if (on_token && !on_token(t)) break;
    if (static_cast<int64_t>(out.size()) >= opt_.max_new_tokens) break;
    if (greedy) {
      if (steps->position() >= session_.n_ctx()) break;  // context full
      // The returned id is appended next unless it stops the loop (a stop id, on_token) or
      // the token budget or the context ends first.
      const bool then_append = static_cast<int64_t>(out.size()) + 1 < opt_.max_new_tokens &&
                               steps->position() + 1 < session_.n_ctx();
      t = steps->next(t, then_append);
    } else {
      if (session_.position() >= session_.n_ctx()) break;  // context full
      const ForwardOutputs o = session_.append({t});
      logits = session_.download_logits(o, 0);
      t = sampler_.sample(logits.data(), n_vocab);
    }
  }
  if (steps) steps->drop_queued();
  session_.set_decode_stats(static_cast<int64_t>(out.size()), now_seconds() - t0);
  return out;
}

}  // namespace df
