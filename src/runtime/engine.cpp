#include "diskformer/engine.h"

#include <algorithm>
#include <chrono>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "gguf/gguf.h"

namespace df {
namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Reads every page of the tensor data once so that the first tokens do not pay for page
// faults, reporting progress on the way.
void prefault(const gguf::File& f, const std::function<void(double)>& progress) {
  const uint64_t total = f.file_size() - f.data_offset();
  const uint8_t* p = f.base() + f.data_offset();
  volatile uint8_t sink = 0;
  const uint64_t step = 4096, report = 64ull << 20;
  for (uint64_t off = 0; off < total; off += step) {
    sink = static_cast<uint8_t>(sink + p[off]);
    if (progress && off % report == 0) progress(static_cast<double>(off) / static_cast<double>(total));
  }
  if (progress) progress(1.0);
}

}  // namespace

Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::load(const EngineOptions& opt) {
  std::unique_ptr<Engine> e(new Engine());
  e->opt_ = opt;
  e->file_ = gguf::File::open(opt.model_path);
  e->tokenizer_ = Tokenizer::from_gguf(*e->file_);
  cpu::CpuOptions co;
  co.threads = opt.threads;
  co.isa = opt.isa == "auto" ? cpu::best_isa() : cpu::parse_isa(opt.isa);
  if (static_cast<int>(co.isa) > static_cast<int>(cpu::best_isa()))
    throw Error("this CPU does not support --isa " + opt.isa);
  e->backend_ = std::make_unique<cpu::CpuBackend>(co);
  e->model_ = load_model(*e->file_, *e->backend_);
  if (e->model_->info().n_vocab < e->tokenizer_->n_vocab())
    throw Error("the output head has fewer rows than the tokenizer has tokens");
  prefault(*e->file_, opt.on_progress);
  return e;
}

std::string Engine::backend_name() const { return backend_->name(); }

Session::Session(Engine& engine) : engine_(engine) {
  StateOptions so;
  so.n_ctx = engine.options().n_ctx;
  so.max_chunk = std::max<int64_t>(1, std::min(engine.options().prefill_chunk, so.n_ctx));
  so.kv_f32 = engine.options().kv_f32;
  state_ = engine.model().new_state(so);
  logits_.resize(static_cast<size_t>(engine.info().n_vocab));
}

void Session::note_written(int64_t pos0, const Token* ids, int64_t n) {
  int64_t same = pos0;  // rows that get the token they already hold keep their contents
  while (same < pos0 + n && same < static_cast<int64_t>(cache_tokens_.size()) &&
         cache_tokens_[static_cast<size_t>(same)] == ids[same - pos0])
    ++same;
  if (same == pos0 + n) return;
  cache_tokens_.resize(static_cast<size_t>(std::min<int64_t>(same, static_cast<int64_t>(cache_tokens_.size()))));
  cache_tokens_.insert(cache_tokens_.end(), ids + (same - pos0), ids + n);
  // A checkpoint after position `same` saw a token that the cache no longer holds.
  std::erase_if(checkpoints_, [&](const Kept& k) { return k.pos > same; });
}

void Session::keep_checkpoint(int64_t pos, CheckpointKind kind) {
  if (state_->rewindable()) return;  // the KV cache alone restarts anywhere
  const int max_kept = engine_.options().max_checkpoints;
  if (max_kept <= 0) return;
  auto it = std::find_if(checkpoints_.begin(), checkpoints_.end(), [&](const Kept& k) { return k.pos >= pos; });
  if (it != checkpoints_.end() && it->pos == pos) {  // already kept; a prompt/turn mark wins
    if (kind != CheckpointKind::PERIODIC) it->kind = kind;
    return;
  }
  std::shared_ptr<const StateCheckpoint> c = state_->capture(pos);
  checkpoints_.insert(it, Kept{pos, kind, std::move(c)});
  while (static_cast<int>(checkpoints_.size()) > max_kept) {
    // Drop the oldest periodic checkpoint, else the oldest; never the one just taken.
    auto victim = std::find_if(checkpoints_.begin(), checkpoints_.end(), [&](const Kept& k) {
      return k.kind == CheckpointKind::PERIODIC && k.pos != pos;
    });
    if (victim == checkpoints_.end()) victim = checkpoints_.front().pos != pos ? checkpoints_.begin() : checkpoints_.begin() + 1;
    checkpoints_.erase(victim);
  }
}

void Session::run(const Token* ids, int64_t n, int64_t pos0, bool all_logits, float* out,
                  const std::vector<int64_t>& marks) {
  note_written(pos0, ids, n);
  const int64_t B = state_->max_chunk();
  const int64_t every = state_->rewindable() ? 0 : engine_.options().checkpoint_every;
  try {
    for (int64_t i = 0; i < n;) {
      int64_t m = std::min(B, n - i);
      if (every > 0) m = std::min(m, ((pos0 + i) / every + 1) * every - (pos0 + i));  // stop at a multiple
      for (int64_t mk : marks)  // and at requested positions
        if (mk > pos0 + i && mk < pos0 + i + m) m = mk - (pos0 + i);
      const bool last = i + m == n;
      float* dst = nullptr;
      if (all_logits) {
        dst = out + i * engine_.info().n_vocab;
      } else if (last) {
        dst = out;
      }
      engine_.model().forward(*state_, ids + i, m, pos0 + i, all_logits, dst);
      i += m;
      tokens_.assign(cache_tokens_.begin(), cache_tokens_.begin() + (pos0 + i));
      if (std::find(marks.begin(), marks.end(), pos0 + i) != marks.end()) keep_checkpoint(pos0 + i, CheckpointKind::MARK);
      if (every > 0 && (pos0 + i) % every == 0) keep_checkpoint(pos0 + i, CheckpointKind::PERIODIC);
    }
  } catch (...) {
    // The model state is undefined past pos0: forget it (KV rows below pos0 and the
    // checkpoints there are still good).
    tokens_.clear();
    cache_tokens_.resize(std::min(cache_tokens_.size(), static_cast<size_t>(pos0)));
    std::erase_if(checkpoints_, [&](const Kept& k) { return k.pos > pos0; });
    throw;
  }
}

const std::vector<float>& Session::prefill(const std::vector<Token>& prompt, const std::vector<int64_t>& checkpoint_at) {
  const auto n = static_cast<int64_t>(prompt.size());
  if (n == 0) throw Error("the prompt is empty");
  if (n > n_ctx())
    throw Error("the prompt has " + std::to_string(n) + " tokens, more than the context of " +
                std::to_string(n_ctx()) + " (raise -c)");
  // Longest common prefix with what the KV cache holds; at least one token is recomputed so
  // that there are logits to return.
  int64_t common = 0;
  while (common < n && common < static_cast<int64_t>(cache_tokens_.size()) &&
         cache_tokens_[static_cast<size_t>(common)] == prompt[static_cast<size_t>(common)])
    ++common;
  const int64_t keep = std::min(common, n - 1);
  // Where to restart: any position on a pure KV cache; otherwise the furthest of the current
  // state position and the kept checkpoints that is at or before `keep` (else 0: a new sequence).
  int64_t start = keep;
  if (!state_->rewindable()) {
    const auto cur = static_cast<int64_t>(tokens_.size());
    start = cur <= keep ? cur : 0;  // the state as it is, or a new sequence
    const Kept* best = nullptr;
    for (const Kept& k : checkpoints_)
      if (k.pos <= keep && k.pos > start) best = &k;
    if (best) {
      state_->restore(*best->state);
      start = best->pos;
    }
  }
  const double t0 = now_seconds();
  run(prompt.data() + start, n - start, start, false, logits_.data(), state_->rewindable() ? std::vector<int64_t>{} : checkpoint_at);
  keep_checkpoint(n, CheckpointKind::PROMPT);
  stats_.prefill_seconds = now_seconds() - t0;
  stats_.prompt_tokens = n;
  stats_.reused_tokens = start;
  stats_.prefilled_tokens = n - start;
  return logits_;
}

const std::vector<float>& Session::decode(Token t) {
  if (static_cast<int64_t>(tokens_.size()) >= n_ctx()) throw Error("the context is full");
  run(&t, 1, static_cast<int64_t>(tokens_.size()), false, logits_.data());
  return logits_;
}

SessionCheckpoint Session::capture() {
  SessionCheckpoint c;
  c.tokens = tokens_;
  c.state = state_->capture(static_cast<int64_t>(tokens_.size()));
  c.logits = logits_;
  return c;
}

void Session::restore(const SessionCheckpoint& c) {
  if (!c.state || c.state->pos != static_cast<int64_t>(c.tokens.size()) || c.logits.size() != logits_.size())
    throw Error("restore: not a checkpoint of this session");
  if (c.tokens.size() > cache_tokens_.size() || !std::equal(c.tokens.begin(), c.tokens.end(), cache_tokens_.begin()))
    throw Error("restore: the KV cache no longer holds the checkpoint's tokens (a later prompt replaced them)");
  state_->restore(*c.state);
  tokens_ = c.tokens;
  logits_ = c.logits;
}

std::vector<int64_t> Session::checkpoint_positions() const {
  std::vector<int64_t> out;
  for (const Kept& k : checkpoints_) out.push_back(k.pos);
  return out;
}

std::vector<float> Session::logits_all(const std::vector<Token>& tokens) {
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) throw Error("the prompt is empty");
  if (n > n_ctx())
    throw Error("the prompt has " + std::to_string(n) + " tokens, more than the context of " +
                std::to_string(n_ctx()) + " (raise -c)");
  std::vector<float> out(static_cast<size_t>(n * engine_.info().n_vocab));
  const double t0 = now_seconds();
  run(tokens.data(), n, 0, true, out.data());
  keep_checkpoint(n, CheckpointKind::PROMPT);
  stats_.prefill_seconds = now_seconds() - t0;
  stats_.prompt_tokens = stats_.prefilled_tokens = n;
  stats_.reused_tokens = 0;
  std::copy(out.end() - engine_.info().n_vocab, out.end(), logits_.begin());
  return out;
}

std::vector<Token> Session::generate(const std::vector<Token>& prompt, const GenerateOptions& opt,
                                     const std::function<bool(Token)>& on_token) {
  Sampler sampler(opt.sampling);
  const Tokenizer& tok = engine_.tokenizer();
  std::vector<Token> out;
  const std::vector<float>* logits = &prefill(prompt, opt.checkpoint_at);
  const int64_t n_vocab = engine_.info().n_vocab;
  stats_.generated_tokens = 0;
  stats_.decode_seconds = 0.0;
  const double t0 = now_seconds();
  while (static_cast<int64_t>(out.size()) < opt.max_new_tokens) {
    const Token t = sampler.sample(logits->data(), n_vocab);
    if (opt.stop_at_eog && tok.is_stop(t)) break;
    out.push_back(t);
    stats_.generated_tokens = static_cast<int64_t>(out.size());
    if (on_token && !on_token(t)) break;
    if (static_cast<int64_t>(out.size()) >= opt.max_new_tokens) break;
    if (static_cast<int64_t>(tokens_.size()) >= n_ctx()) break;  // context full
    logits = &decode(t);
  }
  keep_checkpoint(static_cast<int64_t>(tokens_.size()), CheckpointKind::TURN);
  stats_.decode_seconds = now_seconds() - t0;
  return out;
}

}  // namespace df
