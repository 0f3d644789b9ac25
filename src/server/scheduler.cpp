#include "server/scheduler.h"

#include <algorithm>
#include <exception>

#include "common/error.h"
#include "server/api_error.h"

namespace df::server {
namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

size_t common_prefix(const std::vector<Token>& a, const std::vector<Token>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

Scheduler::Scheduler(Engine& engine, const SchedulerOptions& opt)
    : engine_(engine), step_rows_(opt.step_rows > 0 ? std::min(opt.step_rows, opt.n_slots) : opt.n_slots) {
  if (opt.n_slots < 1) throw Error("the server needs at least one slot (--parallel)");
  const bool mtp = opt.spec.mode == spec::SpecMode::MTP;
  if (mtp && !engine_.model().mtp()) throw Error("--spec mtp: the model has no MTP (nextn) layer");
  GenerateOptions greedy;  // the generators draft greedily; sampled jobs decode plainly
  greedy.sampling.temperature = 0.0f;
  for (int i = 0; i < opt.n_slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->session = std::make_unique<Session>(engine_, mtp ? opt.spec.draft_max + 1 : 0);
    if (mtp) s->mtp = std::make_unique<spec::MtpGenerator>(*s->session, greedy, opt.spec);
    slots_.push_back(std::move(s));
  }
  if (step_rows_ > engine_.options().prefill_chunk)
    throw Error("a decode step of " + std::to_string(step_rows_) + " rows is more than a forward takes (-b " +
                std::to_string(engine_.options().prefill_chunk) + ")");
  best_ = alloc_tensor(engine_.backend(), GgmlType::I32, 1, opt.n_slots, buffers_);
  best_host_.resize(static_cast<size_t>(opt.n_slots));
  c_.n_slots = opt.n_slots;
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { shutdown(std::chrono::milliseconds(0)); }

void Scheduler::submit(std::shared_ptr<Job> job) {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (!accepting_) throw ApiError(503, "the server is shutting down");
    queue_.push_back(std::move(job));
    c_.queued = static_cast<int64_t>(queue_.size());
  }
  cv_.notify_all();
}

void Scheduler::shutdown(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(m_);
  accepting_ = false;
  idle_cv_.wait_for(lock, grace, [&] { return queue_.empty() && c_.active == 0; });
  cancel_all_ = true;
  stop_ = true;
  lock.unlock();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

SchedulerCounters Scheduler::counters() const {
  std::lock_guard<std::mutex> lock(m_);
  SchedulerCounters c = c_;
  if (recent_.size() >= 2) {
    const double dt = std::chrono::duration<double>(Clock::now() - recent_.front().first).count();
    if (dt > 0) c.recent_tokens_per_second = static_cast<double>(recent_.back().second - recent_.front().second) / dt;
  }
  return c;
}

std::vector<std::pair<Scheduler::Slot*, std::shared_ptr<Job>>> Scheduler::take_admissions() {
  std::vector<std::pair<Slot*, std::shared_ptr<Job>>> out;
  const auto now = Clock::now();
  for (auto it = queue_.begin(); it != queue_.end();) {
    Job& j = **it;
    if (j.cancelled() || cancel_all_) {
      j.finish("cancelled");
      ++c_.cancelled;
      it = queue_.erase(it);
    } else if (now >= j.params.deadline) {
      j.finish("error", "the request reached its time limit while waiting for a slot");
      ++c_.failed;
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<Slot*> free;
  for (auto& s : slots_)
    if (!s->job) free.push_back(s.get());
  // Claimed slots are marked by a placeholder job so that later picks skip them.
  while (!queue_.empty() && !free.empty()) {
    std::shared_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    // The free slot holding the longest prefix of this prompt; least recently used on ties.
    auto best = free.begin();
    size_t best_len = common_prefix((*best)->session->tokens(), job->prompt);
    for (auto it = free.begin() + 1; it != free.end(); ++it) {
      const size_t len = common_prefix((*it)->session->tokens(), job->prompt);
      if (len > best_len || (len == best_len && (*it)->last_used < (*best)->last_used)) {
        best = it;
        best_len = len;
      }
    }
    Slot* s = *best;
    free.erase(best);
    s->job = job;
    s->last_used = ++admissions_;
    out.emplace_back(s, std::move(job));
  }
  c_.queued = static_cast<int64_t>(queue_.size());
  c_.active += static_cast<int64_t>(out.size());
  return out;
}

void Scheduler::loop() {
  for (;;) {
    std::vector<std::pair<Slot*, std::shared_ptr<Job>>> admitted;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || c_.active > 0; });
      if (cancel_all_)
        for (auto& s : slots_)
          if (s->job) s->job->cancel();
      if (stop_ && queue_.empty() && c_.active == 0) break;
      admitted = take_admissions();
    }
    for (auto& [slot, job] : admitted) start(*slot, std::move(job));

    // The slots to advance: cancelled jobs (the client went away) end here, before the step.
    std::vector<Slot*> rows;
    for (auto& s : slots_) {
      if (!s->job) continue;
      if (s->job->cancelled()) {
        release(*s, "cancelled");
        continue;
      }
      rows.push_back(s.get());
    }
    if (!rows.empty()) step(rows);

    std::lock_guard<std::mutex> lock(m_);
    if (queue_.empty() && c_.active == 0) idle_cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(m_);
  idle_cv_.notify_all();
}

void Scheduler::start(Slot& s, std::shared_ptr<Job> job) {
  const GenParams& p = job->params;
  s.chooser = std::make_unique<TokenChooser>(p.choice);
  s.decoder = std::make_unique<StreamDecoder>(engine_.tokenizer());
  s.stops = std::make_unique<StopMatcher>(p.stop);
  s.generated = 0;
  s.pending = -1;
  const auto t0 = Clock::now();
  const std::vector<float>* logits = nullptr;
  try {
    logits = &s.session->prefill(job->prompt, p.checkpoint_at, s.mtp ? s.mtp->prefill_tap() : Session::RowTap{});
  } catch (const std::exception& e) {
    job->start(0);
    release(s, "error", e.what());
    return;
  }
  const Stats& st = s.session->stats();
  job->start(st.reused_tokens);
  {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.started;
    c_.prompt_tokens += st.prompt_tokens;
    c_.cached_tokens += st.reused_tokens;
    c_.prefill_seconds += seconds_since(t0);
  }
  if (job->cancelled()) {
    release(s, "cancelled");
    return;
  }
  advance(s, logits->data());
}

void Scheduler::step(const std::vector<Slot*>& rows) {
  if (rows.size() == 1 && rows[0]->mtp && !rows[0]->chooser->needs_logits()) {
    spec_step(*rows[0]);
    return;
  }
  {
    // Counted before the groups run: a step's rows are added (and its tokens handed to the
    // clients) after it, so a metrics read never holds a step's rows without the step itself.
    std::lock_guard<std::mutex> lock(m_);
    ++c_.steps;
  }
  for (size_t i = 0; i < rows.size(); i += static_cast<size_t>(step_rows_)) {
    const size_t n = std::min(rows.size() - i, static_cast<size_t>(step_rows_));
    step_group(std::vector<Slot*>(rows.begin() + static_cast<std::ptrdiff_t>(i),
                                  rows.begin() + static_cast<std::ptrdiff_t>(i + n)));
  }
}

void Scheduler::step_group(const std::vector<Slot*>& rows) {
  const auto t0 = Clock::now();
  const auto n = static_cast<int64_t>(rows.size());
  std::vector<Session*> sessions;
  std::vector<Token> tokens;
  for (Slot* s : rows) {
    sessions.push_back(s->session.get());
    tokens.push_back(s->pending);
  }
  ForwardOutputs out;
  try {
    out = Session::append_each(sessions, tokens);
  } catch (const std::exception& e) {
    for (Slot* s : rows) release(*s, "error", e.what());
    return;
  }
  // Greedy rows: one argmax over all rows on the device, n ids come back.
  Backend& b = engine_.backend();
  bool any_greedy = false;
  for (Slot* s : rows) any_greedy |= !s->chooser->needs_logits();
  if (any_greedy) {
    const Tensor ids = best_.slice_rows(0, n);
    b.argmax(out.logits, ids);
    b.download(ids, best_host_.data(), static_cast<size_t>(n) * sizeof(Token));
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.forwards;
    c_.step_rows += n;
    c_.decode_seconds += seconds_since(t0);
  }
  for (int64_t i = 0; i < n; ++i)  // the draft heads take their rows as plain steps
    if (Slot& s = *rows[static_cast<size_t>(i)]; s.mtp) s.mtp->note_plain_step(tokens[static_cast<size_t>(i)], out.hidden.slice_rows(i, 1));
  for (int64_t i = 0; i < n; ++i) {
    Slot& s = *rows[static_cast<size_t>(i)];
    if (!s.chooser->needs_logits()) {
      s.chooser->note(best_host_[static_cast<size_t>(i)]);
      take(s, best_host_[static_cast<size_t>(i)], nullptr);
      continue;
    }
    row_.resize(static_cast<size_t>(out.logits.cols));
    const Tensor r = out.logits.slice_rows(i, 1);
    b.download(r, row_.data(), r.nbytes());
    advance(s, row_.data());
  }
}

void Scheduler::spec_step(Slot& s) {
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.steps;
  }
  const GenParams& p = s.job->params;
  const int64_t left = p.max_tokens > 0 ? p.max_tokens - s.generated : s.session->n_ctx();
  // The job ends (released) only after the cycle has put the session back where plain
  // decoding would be: mark_turn_end's checkpoint must not see a verify's extra rows.
  const char* reason = nullptr;
  const spec::SpecStats& st = s.mtp->stats();
  const int64_t cycles0 = st.cycles, drafted0 = st.drafted, accepted0 = st.accepted;
  try {
    s.mtp->step(s.pending, left, [&](Token t, int64_t pos) {
      s.chooser->note(t);
      reason = take_token(s, t, nullptr, pos);
      return reason == nullptr;
    });
  } catch (const std::exception& e) {
    release(s, "error", e.what());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.forwards;
    ++c_.step_rows;
    c_.decode_seconds += seconds_since(t0);
    c_.spec_cycles += st.cycles - cycles0;
    c_.spec_drafted += st.drafted - drafted0;
    c_.spec_accepted += st.accepted - accepted0;
  }
  if (reason) release(s, reason);
}

void Scheduler::advance(Slot& s, const float* logits) {
  const Token t = s.chooser->choose(logits, engine_.info().n_vocab);
  take(s, t, logits);
}

void Scheduler::take(Slot& s, Token t, const float* logits) {
  if (const char* reason = take_token(s, t, logits)) release(s, reason);
}

const char* Scheduler::take_token(Slot& s, Token t, const float* logits, int64_t pos) {
  Job& job = *s.job;
  const GenParams& p = job.params;
  if (pos < 0) pos = s.session->position();
  if (!p.ignore_eos && engine_.tokenizer().is_stop(t)) return "stop";
  ++s.generated;
  TokenLogprob lp;
  const bool want_lp = s.chooser->wants_logprobs() && logits;
  if (want_lp) lp = s.chooser->logprobs(logits, engine_.info().n_vocab, t);
  const std::string text = s.stops->push(s.decoder->push(t));
  job.emit(text, want_lp ? &lp : nullptr, true);
  {
    std::lock_guard<std::mutex> lock(m_);
    ++c_.generated_tokens;
    const auto now = Clock::now();
    recent_.emplace_back(now, c_.generated_tokens);
    while (recent_.size() > 2 && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
  }
  if (s.stops->stopped()) return "stop";
  if (p.max_tokens > 0 && s.generated >= p.max_tokens) return "length";
  if (pos >= s.session->n_ctx()) return "length";
  if (Clock::now() >= p.deadline) return "length";
  s.pending = t;
  return nullptr;
}

void Scheduler::release(Slot& s, const std::string& reason, const std::string& error) {
  std::shared_ptr<Job> job = std::move(s.job);
  s.job.reset();
  s.pending = -1;
  if (!job) return;
  // Hybrid models: a checkpoint where this answer ends, for a continuation that resends it.
  if (reason == "stop" || reason == "length") s.session->mark_turn_end();
  if (reason != "error" && reason != "cancelled" && s.stops && !s.stops->stopped()) {
    std::string rest = s.stops->push(s.decoder->flush());
    if (!s.stops->stopped()) rest += s.stops->flush();
    job->emit(rest, nullptr, false);
  }
  {
    // Counted before the job reports its end, so that /metrics never lags the client.
    std::lock_guard<std::mutex> lock(m_);
    --c_.active;
    if (reason == "stop") ++c_.finished_stop;
    else if (reason == "length") ++c_.finished_length;
    else if (reason == "cancelled") ++c_.cancelled;
    else ++c_.failed;
  }
  job->finish(reason, error);
}

}  // namespace df::server
