#include "diskformer/engine.h"

#include <algorithm>
#include <chrono>

#include "backend/backend_factory.h"
#include "common/error.h"
#include "diskformer/generator.h"
#include "gguf/gguf.h"
#include "runtime/backend_options.h"

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
  if (!opt.mtp_head_path.empty()) {
    try {
      e->head_file_ = gguf::File::open(opt.mtp_head_path);
    } catch (const Error& x) {
      throw Error(std::string("the MTP head file: ") + x.what());
    }
  }
  e->tokenizer_ = Tokenizer::from_gguf(*e->file_);
  e->backend_ = make_backend(backend_options(opt));
  if (e->opt_.prefill_chunk <= 0) e->opt_.prefill_chunk = e->backend_->default_prefill_chunk();
  e->model_ = load_model(*e->file_, *e->backend_, e->head_file_.get());
  if (e->model_->info().n_vocab < e->tokenizer_->n_vocab())
    throw Error("the output head has fewer rows than the tokenizer has tokens");
  if (opt.draft_vocab < 0) throw Error("--draft-vocab must not be negative");
  if (opt.draft_context < 0) throw Error("--draft-context must not be negative");
  if (opt.draft_context > 0 && opt.draft_vocab == 0) throw Error("--draft-context needs --draft-vocab N (the prefix)");
  if (opt.draft_vocab > 0 && e->model_->mtp()) e->model_->mtp()->set_draft_vocab(opt.draft_vocab, opt.draft_context);
  if (e->backend_->prefault_weights()) {
    if (e->head_file_) prefault(*e->head_file_, {});
    prefault(*e->file_, opt.on_progress);
  } else if (opt.on_progress) {
    opt.on_progress(1.0);
  }
  return e;
}

std::string Engine::backend_name() const { return backend_->name(); }

std::optional<SpecCosts> Engine::spec_costs(int draft_max) const {
  std::lock_guard<std::mutex> lock(costs_mu_);
  const auto it = spec_costs_.lower_bound(draft_max);  // the shallowest table deep enough
  if (it == spec_costs_.end()) return std::nullopt;
  SpecCosts c = it->second;
  c.verify.resize(static_cast<size_t>(draft_max) + 1);
  return c;
}

void Engine::keep_spec_costs(SpecCosts c) {
  if (c.verify.size() < 2) throw Error("a speculative cost table needs a plain step and a verify");
  std::lock_guard<std::mutex> lock(costs_mu_);
  const int depth = static_cast<int>(c.verify.size()) - 1;
  spec_costs_.insert_or_assign(depth, std::move(c));
}

Session::Session(Engine& engine) : Session(engine, engine.options().max_snapshots) {}

Session::Session(Engine& engine, int64_t max_snapshots) : engine_(engine) {
  StateOptions so;
  so.n_ctx = engine.options().n_ctx;
  so.max_chunk = std::max<int64_t>(1, std::min(engine.options().prefill_chunk, so.n_ctx));
  so.kv_f32 = engine.options().kv_f32;
  so.graphs = engine.options().graphs;
  so.max_snapshots = max_snapshots;
  so.max_checkpoints = std::max(0, engine.options().max_checkpoints) + 1;  // + one for capture()
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

ForwardOutputs Session::step(const Token* ids, int64_t n, int64_t pos0, bool all_outputs, bool last_output,
                            const ForwardOptions& fo) {
  note_written(pos0, ids, n);
  snap_n_ = 0;
  const Batch batch = Batch::sequence(ids, n, pos0, all_outputs, last_output);
  try {
    ForwardOutputs out = engine_.model().forward(*state_, batch, fo);
    tokens_.assign(cache_tokens_.begin(), cache_tokens_.begin() + (pos0 + n));
    return out;
  } catch (...) {
    // The model state is undefined past pos0: forget it (KV rows below pos0 and the
    // checkpoints there are still good).
    tokens_.clear();
    cache_tokens_.resize(std::min(cache_tokens_.size(), static_cast<size_t>(pos0)));
    std::erase_if(checkpoints_, [&](const Kept& k) { return k.pos > pos0; });
    throw;
  }
}

void Session::run(const Token* ids, int64_t n, int64_t pos0, bool all_logits, float* out,
                  const std::vector<int64_t>& marks, const RowTap& tap) {
  const int64_t B = state_->max_chunk();
  const int64_t every = state_->rewindable() ? 0 : engine_.options().checkpoint_every;
  const int64_t n_vocab = engine_.info().n_vocab;
  for (int64_t i = 0; i < n;) {
    int64_t m = std::min(B, n - i);
    if (every > 0) m = std::min(m, ((pos0 + i) / every + 1) * every - (pos0 + i));  // stop at a multiple
    for (int64_t mk : marks)  // and at requested positions
      if (mk > pos0 + i && mk < pos0 + i + m) m = mk - (pos0 + i);
    const bool last = i + m == n;
    const bool want = out && (all_logits || last);
    ForwardOptions fo;
    fo.row_exact = false;  // prompt prefill: llama.cpp's batched kernels
    if (tap) {  // hidden states of every row; logits only where wanted
      fo.logits = want;
      fo.logits_last = !all_logits;
    }
    const ForwardOutputs o = step(ids + i, m, pos0 + i, (want && all_logits) || bool(tap), want || bool(tap), fo);
    if (want) {
      float* dst = all_logits ? out + i * n_vocab : out;
      engine_.backend().download(o.logits, dst, o.logits.nbytes());
    }
    if (tap) tap(pos0 + i, ids + i, m, o);  // after the download: a tap may run other forwards
    i += m;
    if (std::find(marks.begin(), marks.end(), pos0 + i) != marks.end()) keep_checkpoint(pos0 + i, CheckpointKind::MARK);
    if (every > 0 && (pos0 + i) % every == 0) keep_checkpoint(pos0 + i, CheckpointKind::PERIODIC);
  }
}

ForwardOutputs Session::append(const std::vector<Token>& tokens, const AppendOptions& opt) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t pos0 = position();
  if (n == 0) throw Error("append: no tokens");
  if (n > state_->max_chunk())
    throw Error("append: " + std::to_string(n) + " tokens, more than the chunk of " + std::to_string(state_->max_chunk()));
  if (pos0 + n > n_ctx()) throw Error("the context is full");
  ForwardOptions fo;
  fo.logits = opt.logits;
  fo.snapshots = opt.snapshots && !state_->rewindable();
  fo.row_exact = opt.row_exact;
  fo.ids_from = opt.ids_from;
  fo.ids_row0 = opt.ids_row0;
  if (opt.ids_from.data) {
    // Rows from ids_row0 on hold placeholders: what the cache held there (and any checkpoint
    // after them) cannot be compared with them, so it is forgotten before note_written
    // takes a placeholder that happens to equal the cached id for that id.
    const int64_t q = pos0 + std::max<int64_t>(0, opt.ids_row0);
    if (q < static_cast<int64_t>(cache_tokens_.size())) cache_tokens_.resize(static_cast<size_t>(q));
    std::erase_if(checkpoints_, [&](const Kept& k) { return k.pos > q; });
  }
  ForwardOutputs out = step(tokens.data(), n, pos0, opt.all_outputs, true, fo);
  if (fo.snapshots) {
    snap_pos0_ = pos0;
    snap_n_ = n;
  }
  return out;
}

void Session::set_tokens(int64_t pos0, const Token* ids, int64_t n) {
  if (pos0 < 0 || n < 0 || pos0 + n > static_cast<int64_t>(cache_tokens_.size()))
    throw Error("set_tokens: rows outside the session's tokens");
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(pos0 + i);
    cache_tokens_[at] = ids[i];
    if (at < tokens_.size()) tokens_[at] = ids[i];
  }
  // The state itself was computed from the real ids: checkpoints stay valid.
}

void Session::rewind(int64_t pos) {
  const int64_t cur = position();
  if (pos < 0 || pos > cur) throw Error("rewind: position " + std::to_string(pos) + " is past the session's " + std::to_string(cur));
  if (pos == cur) return;
  if (state_->rewindable()) {
    state_->truncate(pos);
  } else if (snap_n_ > 0 && pos > snap_pos0_ && pos <= snap_pos0_ + snap_n_) {
    state_->accept(pos - snap_pos0_);  // the snapshot slot: no replay
    snap_n_ = pos - snap_pos0_;
  } else {
    // The nearest checkpoint at or before pos, then the tokens after it again (they are
    // still in cache_tokens_).
    const Kept* best = nullptr;
    for (const Kept& k : checkpoints_)
      if (k.pos <= pos) best = &k;
    int64_t start = 0;
    if (best) {
      state_->restore(*best->state);
      start = best->pos;
    }
    const std::vector<Token> redo(cache_tokens_.begin() + start, cache_tokens_.begin() + pos);
    tokens_.assign(cache_tokens_.begin(), cache_tokens_.begin() + start);
    if (!redo.empty()) run(redo.data(), static_cast<int64_t>(redo.size()), start, false, nullptr);
  }
  tokens_.resize(static_cast<size_t>(pos));
}

ForwardOutputs Session::append_each(std::span<Session* const> sessions, std::span<const Token> tokens) {
  if (sessions.empty() || sessions.size() != tokens.size()) throw Error("append_each: one token for each session");
  Engine& engine = sessions[0]->engine_;
  Batch batch;
  std::vector<ModelState*> states;
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session& s = *sessions[i];
    if (&s.engine_ != &engine) throw Error("append_each: sessions of different engines");
    if (std::find(states.begin(), states.end(), s.state_.get()) != states.end())
      throw Error("append_each: a session appears twice");
    if (s.position() >= s.n_ctx()) throw Error("the context is full");
    batch.add(tokens[i], static_cast<int32_t>(s.position()), static_cast<int32_t>(i), true);
    states.push_back(s.state_.get());
  }
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session& s = *sessions[i];
    s.note_written(s.position(), &tokens[i], 1);
    s.snap_n_ = 0;
  }
  try {
    ForwardOutputs out = engine.model().forward(std::span<ModelState* const>(states), batch, {});
    for (Session* s : sessions) s->tokens_.assign(s->cache_tokens_.begin(), s->cache_tokens_.begin() + (s->position() + 1));
    return out;
  } catch (...) {
    // As in step(): every state in the batch is undefined past its position.
    for (size_t i = 0; i < sessions.size(); ++i) {
      Session& s = *sessions[i];
      const int64_t pos0 = batch.pos[i];
      s.tokens_.clear();
      s.cache_tokens_.resize(std::min(s.cache_tokens_.size(), static_cast<size_t>(pos0)));
      std::erase_if(s.checkpoints_, [&](const Kept& k) { return k.pos > pos0; });
    }
    throw;
  }
}

std::vector<float> Session::download_logits(const ForwardOutputs& out, int64_t i) {
  if (out.logits.empty() || i < 0 || i >= out.logits.rows) throw Error("download_logits: no such output row");
  std::vector<float> v(static_cast<size_t>(out.logits.cols));
  const Tensor row = out.logits.slice_rows(i, 1);
  engine_.backend().download(row, v.data(), row.nbytes());
  return v;
}

void Session::mark_turn_end() { keep_checkpoint(position(), CheckpointKind::TURN); }

const std::vector<float>& Session::prefill(const std::vector<Token>& prompt, const std::vector<int64_t>& checkpoint_at,
                                          const RowTap& tap) {
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
  run(prompt.data() + start, n - start, start, false, logits_.data(),
      state_->rewindable() ? std::vector<int64_t>{} : checkpoint_at, tap);
  keep_checkpoint(n, CheckpointKind::PROMPT);
  stats_.prefill_seconds = now_seconds() - t0;
  stats_.prompt_tokens = n;
  stats_.reused_tokens = start;
  stats_.prefilled_tokens = n - start;
  return logits_;
}

const std::vector<float>& Session::decode(Token t) {
  if (position() >= n_ctx()) throw Error("the context is full");
  const ForwardOutputs o = step(&t, 1, position(), false, true, ForwardOptions{});
  engine_.backend().download(o.logits, logits_.data(), o.logits.nbytes());
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
  PlainGenerator gen(*this, opt);
  std::vector<Token> out = gen.run(prompt, on_token);
  mark_turn_end();
  return out;
}

}  // namespace df
