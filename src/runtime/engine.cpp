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

void Session::run(const Token* ids, int64_t n, int64_t pos0, bool all_logits, float* out) {
  const int64_t B = state_->max_chunk();
  for (int64_t i = 0; i < n; i += B) {
    const int64_t m = std::min(B, n - i);
    const bool last = i + m == n;
    float* dst = nullptr;
    if (all_logits) {
      dst = out + i * engine_.info().n_vocab;
    } else if (last) {
      dst = out;
    }
    engine_.model().forward(*state_, ids + i, m, pos0 + i, all_logits, dst);
  }
}

const std::vector<float>& Session::prefill(const std::vector<Token>& prompt) {
  const auto n = static_cast<int64_t>(prompt.size());
  if (n == 0) throw Error("the prompt is empty");
  if (n > n_ctx())
    throw Error("the prompt has " + std::to_string(n) + " tokens, more than the context of " +
                std::to_string(n_ctx()) + " (raise -c)");
  // Longest common prefix with what the cache holds; at least one token is recomputed so
  // that there are logits to return.
  int64_t keep = 0;
  while (keep < n && keep < static_cast<int64_t>(tokens_.size()) && tokens_[keep] == prompt[keep]) ++keep;
  keep = std::min(keep, n - 1);
  const double t0 = now_seconds();
  run(prompt.data() + keep, n - keep, keep, false, logits_.data());
  stats_.prefill_seconds = now_seconds() - t0;
  stats_.prompt_tokens = n;
  stats_.reused_tokens = keep;
  stats_.prefilled_tokens = n - keep;
  tokens_ = prompt;
  return logits_;
}

const std::vector<float>& Session::decode(Token t) {
  if (static_cast<int64_t>(tokens_.size()) >= n_ctx()) throw Error("the context is full");
  run(&t, 1, static_cast<int64_t>(tokens_.size()), false, logits_.data());
  tokens_.push_back(t);
  return logits_;
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
  stats_.prefill_seconds = now_seconds() - t0;
  stats_.prompt_tokens = stats_.prefilled_tokens = n;
  stats_.reused_tokens = 0;
  tokens_ = tokens;
  std::copy(out.end() - engine_.info().n_vocab, out.end(), logits_.begin());
  return out;
}

std::vector<Token> Session::generate(const std::vector<Token>& prompt, const GenerateOptions& opt,
                                     const std::function<bool(Token)>& on_token) {
  Sampler sampler(opt.sampling);
  const Tokenizer& tok = engine_.tokenizer();
  std::vector<Token> out;
  const std::vector<float>* logits = &prefill(prompt);
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
  stats_.decode_seconds = now_seconds() - t0;
  return out;
}

}  // namespace df
