#include "spec/mtp_generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "common/error.h"
#include "diskformer/generator.h"

namespace df::spec {
namespace {

// Also the clock of the cost table and the cycle timings, on every backend. (The CPU backend
// timed them in process CPU seconds until stop 37; its thread pool's workers spin in a
// multi-row forward and idle in a one-row step, so CPU seconds made a verify look dearer against
// a plain step than it ran: the adaptive depth chose plain decoding for most of some generations
// where speculation at depth 3 was 1.14-1.20x faster. A loaded machine's lost time slices are
// outliers that the depth policy's medians leave out.)
double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

MtpHead& require_head(Model& m) {
  MtpHead* h = m.mtp();
  if (!h) throw Error("speculative decoding with --spec mtp needs a model with an MTP (nextn) layer");
  return *h;
}

// Probability of `id` in a sparse distribution (0 when the filters removed it).
float prob_of(const std::vector<Sampler::Prob>& d, Token id) {
  for (const auto& e : d)
    if (e.id == id) return e.p;
  return 0.0f;
}

}  // namespace

MtpGenerator::MtpGenerator(Session& session, const GenerateOptions& opt, const SpecOptions& spec)
    : session_(session),
      opt_(opt),
      spec_(spec),
      model_(session.engine().model()),
      head_(require_head(model_)),
      b_(session.engine().backend()),
      sampler_(opt.sampling),
      oracle_rng_(spec.oracle_seed),
      cpu_(b_.name().rfind("cpu", 0) == 0) {
  if (spec.draft_max < 1 || spec.draft_max > 7) throw Error("--draft-max must be in 1..7");
  if (spec.draft_accept >= 0.0 && opt.sampling.temperature > 0.0f)
    throw Error("--draft-accept is a greedy benchmark option (use --temp 0)");
  ModelState& st = session.state();
  if (!st.rewindable() && st.max_snapshots() < spec.draft_max + 1)
    throw Error("speculative decoding needs " + std::to_string(spec.draft_max + 1) +
                " recurrent snapshot slots in the session, it has " + std::to_string(st.max_snapshots()));
  if (st.max_chunk() < spec.draft_max + 1) throw Error("the prefill chunk is smaller than a verify batch");
  dim_ = model_.info().n_embd;
  n_vocab_ = model_.info().n_vocab;
  rows_ = std::max<int64_t>(st.max_chunk(), spec.draft_max + DepthPolicy::kPlainStretch + 4);
  StateOptions so;
  so.n_ctx = session.n_ctx();
  so.max_chunk = rows_;
  so.kv_f32 = session.engine().options().kv_f32;
  so.graphs = session.engine().options().graphs;
  head_state_ = head_.new_state(so);
  hin_ = alloc_tensor(b_, GgmlType::F32, dim_, rows_, buffers_);
  g_ = alloc_tensor(b_, GgmlType::F32, dim_, 1, buffers_);
  best_ = alloc_tensor(b_, GgmlType::I32, 1, rows_, buffers_);
  if (b_.wants_moe_forecast(true)) fc_ids_ = alloc_tensor(b_, GgmlType::I32, 1, rows_, buffers_);
  const std::vector<float> zeros(static_cast<size_t>(dim_), 0.0f);
  b_.upload(hin_.slice_rows(0, 1), zeros.data(), zeros.size() * sizeof(float));
  b_.upload(g_, zeros.data(), zeros.size() * sizeof(float));
  if (spec.draft_accept >= 0.0 && !spec.oracle.empty()) {
    oracle_dev_ = alloc_tensor(b_, GgmlType::I32, 1, static_cast<int64_t>(spec.oracle.size()), buffers_);
    b_.upload(oracle_dev_, spec.oracle.data(), spec.oracle.size() * sizeof(Token));
  }
  stats_.drafted_at.assign(static_cast<size_t>(spec.draft_max), 0);
  stats_.accepted_at.assign(static_cast<size_t>(spec.draft_max), 0);
  measure_costs();
  stats_.cycles_at.assign(static_cast<size_t>(spec.draft_max) + 1, 0);
  policy_ = std::make_unique<DepthPolicy>(spec.draft_max, spec.draft_fixed, stats_.cost_table);
}

MtpGenerator::~MtpGenerator() = default;

// The cost table is measured once per engine (Engine::spec_costs keeps it): the first
// generator of an engine measures it, later ones (requests, chat turns, bench rounds) reuse it.
// The measurement, on scratch states: a plain step (one row, its argmax and the id's
// download), a verify of k = 2..draft_max+1 rows (snapshots, every row's logits and argmax),
// a head catch-up forward of kCatchUpGuess rows and one head row (in that order, as in a
// cycle). Every shape runs kWarm times first (CUDA: eagerly, then recording its graph), then
// kReps times interleaved with the others; the medians are kept (a loaded machine's outliers
// do not move them).
void MtpGenerator::measure_costs() {
  Engine& engine = session_.engine();
  std::optional<SpecCosts> kept = engine.spec_costs(spec_.draft_max);
  stats_.cost_table_reused = kept.has_value();
  if (!kept) {
    const double t0 = now_seconds();
    kept = measure_cost_table();
    kept->measure_seconds = now_seconds() - t0;
    stats_.cost_measure_seconds = kept->measure_seconds;
    engine.keep_spec_costs(*kept);
  }
  stats_.cost_verify = kept->verify;
  stats_.cost_head = kept->head;
  stats_.cost_head_catchup = kept->head_catchup;
  // A cycle of depth d: the head's catch-up with x's row, d - 1 chained head rows, the verify
  // of d + 1 rows. stats_.cost_verify[0] is the plain step (no snapshots).
  const int K = spec_.draft_max + 1;
  stats_.cost_table.assign(static_cast<size_t>(K), 0.0);
  stats_.cost_table[0] = stats_.cost_verify[0];
  for (int d = 1; d < K; ++d)
    stats_.cost_table[static_cast<size_t>(d)] =
        stats_.cost_verify[static_cast<size_t>(d)] + stats_.cost_head_catchup + (d - 1) * stats_.cost_head;
}

SpecCosts MtpGenerator::measure_cost_table() {
  constexpr int kWarm = 2, kReps = 5;
  const int K = spec_.draft_max + 1;
  StateOptions so;
  so.n_ctx = K + 1;
  so.max_chunk = K;
  so.max_snapshots = K;
  so.kv_f32 = session_.engine().options().kv_f32;
  so.graphs = session_.engine().options().graphs;
  std::unique_ptr<ModelState> st = model_.new_state(so);
  StateOptions ho = so;
  ho.n_ctx = kCatchUpGuess + 1;
  ho.max_chunk = kCatchUpGuess;
  ho.max_snapshots = 0;
  std::unique_ptr<ModelState> hs = head_.new_state(ho);
  // ids: the rows of the largest call timed (the verify of K rows or the head's catch-up).
  const std::vector<Token> ids(static_cast<size_t>(std::max<int64_t>(K, kCatchUpGuess)), 0);
  const std::vector<float> zeros(static_cast<size_t>(dim_ * kCatchUpGuess), 0.0f);
  b_.upload(hin_.slice_rows(0, kCatchUpGuess), zeros.data(), zeros.size() * sizeof(float));
  std::vector<int32_t> sink(static_cast<size_t>(K));
  // samples[m]: m = k - 1 for a trunk forward of k rows (k = 1: the plain step), K: one head
  // row, K + 1: the head's catch-up.
  std::vector<std::vector<double>> samples(static_cast<size_t>(K) + 2);
  auto sync_ids = [&](const ForwardOutputs& o, int64_t rows) {
    b_.argmax(o.logits, best_.slice_rows(0, rows));
    b_.download(best_.slice_rows(0, rows), sink.data(), static_cast<size_t>(rows) * sizeof(int32_t));
  };
  for (int rep = 0; rep < kWarm + kReps; ++rep) {
    // In a cycle's order: the head's catch-up right after a trunk forward (the trunk's weights
    // have taken the caches), then a head row after it (the head's weights warm). Timed the
    // other way round, the CPU table had a head row (0.23-0.25 ms) dearer than a catch-up of
    // three (0.17 ms), and deep drafts looked dearer than they run.
    for (int i = 0; i < K + 2; ++i) {
      const int m = i < K ? i : (i == K ? K + 1 : K);
      const double t0 = now_seconds();
      if (m < K) {
        const int k = m + 1;
        ForwardOptions fo;
        fo.snapshots = k > 1 && !st->rewindable();
        const ForwardOutputs o = model_.forward(*st, Batch::sequence(ids.data(), k, 0, k > 1, true), fo);
        sync_ids(o, k > 1 ? k : 1);
      } else {
        const int64_t n = m == K ? 1 : kCatchUpGuess;
        hs->truncate(0);
        ForwardOptions fo;
        fo.row_exact = head_row_exact(n);
        const ForwardOutputs o = head_.forward(*hs, Batch::sequence(ids.data(), n, 0, false, true),
                                               n == 1 ? g_ : hin_.slice_rows(0, n), fo);
        sync_ids(o, 1);
      }
      if (rep >= kWarm) samples[static_cast<size_t>(m)].push_back(now_seconds() - t0);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  SpecCosts c;
  c.verify.resize(static_cast<size_t>(K));
  for (int k = 1; k <= K; ++k) c.verify[static_cast<size_t>(k - 1)] = median(samples[static_cast<size_t>(k - 1)]);
  c.head = median(samples[static_cast<size_t>(K)]);
  c.head_catchup = median(samples[static_cast<size_t>(K) + 1]);
  return c;
}

bool MtpGenerator::head_row_exact(int64_t n) const {
  // Drafts never change the output, so the head takes the fastest kernels: on the CPU backend
  // the row-exact Q8_0 kernel for up to 8 rows (2-3 rows: 0.44-0.60x the time of the batched
  // tiles, bench/cpu/results/cpuspec_2026-12-02.md), elsewhere the batched kernels from 2 rows.
  return n == 1 || (cpu_ && n <= kHeadExactRows);
}

ForwardOutputs MtpGenerator::head_forward(const Token* ids, int64_t n, int64_t pos0, const Tensor& hidden,
                                          bool output, const Tensor& ids_from) {
  // The head's KV cache is pure attention: rows past pos0 (earlier drafts) are overwritten.
  if (pos0 > 0 && head_state_->position() > pos0) head_state_->truncate(pos0);
  const Batch batch = Batch::sequence(ids, n, pos0, false, output);
  ForwardOptions fo;
  fo.logits = output;
  fo.row_exact = head_row_exact(n);
  fo.ids_from = ids_from;
  return head_.forward(*head_state_, batch, hidden, fo);
}

void MtpGenerator::feed_prompt_rows(int64_t pos0, const Token* ids, int64_t n, const ForwardOutputs& out) {
  const double t0 = now_seconds();
  if (pos0 != head_pos_ || !pend_tokens_.empty()) {
    // A new prompt: rows below pos0 are the ones the session reused. The head's rows there
    // are right when it wrote them for the same tokens; h_{pos0-1} is known only when the
    // head stopped exactly at pos0 (0 at a sequence start, as llama.cpp's first row).
    if (pos0 != head_pos_) {
      const std::vector<float> zeros(static_cast<size_t>(dim_), 0.0f);
      b_.upload(hin_.slice_rows(0, 1), zeros.data(), zeros.size() * sizeof(float));
    }
    pend_tokens_.clear();
    head_pos_ = pos0;
  }
  // Head row p = pos0 + i takes token ids[i] and h_{p-1}: hin_ row 0, then trunk rows 0..n-2.
  if (n > 1) b_.copy(out.hidden.slice_rows(0, n - 1), hin_.slice_rows(1, n - 1));
  b_.copy(out.hidden.slice_rows(n - 1, 1), g_);  // h of the chunk's last row, for the next row
  head_forward(ids, n, pos0, hin_.slice_rows(0, n), false);
  b_.copy(g_, hin_.slice_rows(0, 1));
  head_pos_ = pos0 + n;
  stats_.head_seconds += now_seconds() - t0;
}

void MtpGenerator::flush_pending() {
  const auto len = static_cast<int64_t>(pend_tokens_.size());
  if (len == 0) return;
  const double t0 = now_seconds();
  head_forward(pend_tokens_.data(), len, head_pos_, hin_.slice_rows(0, len), false);
  b_.copy(hin_.slice_rows(len, 1), hin_.slice_rows(0, 1));
  head_pos_ += len;
  pend_tokens_.clear();
  stats_.head_seconds += now_seconds() - t0;
}

void MtpGenerator::head_argmax(const Tensor& logits, const Tensor& out) {
  if (head_.draft_slots() > 0)
    b_.argmax_ids(logits, head_.draft_ids(), out);  // columns -> token ids
  else
    b_.argmax(logits, out);
}

Token MtpGenerator::pick(const ForwardOutputs& o, int64_t row, std::vector<Sampler::Prob>* dist, bool head) {
  if (opt_.sampling.temperature <= 0.0f) {
    if (head)
      head_argmax(o.logits.slice_rows(row, 1), best_.slice_rows(0, 1));
    else
      b_.argmax(o.logits.slice_rows(row, 1), best_.slice_rows(0, 1));
    Token t = 0;
    b_.download(best_.slice_rows(0, 1), &t, sizeof(t));
    return t;
  }
  // o.logits.cols: n_vocab (the trunk's) or the head's drafting columns, of which the first
  // draft_columns_used() hold tokens (ids: draft_id)
  std::vector<float> logits(static_cast<size_t>(o.logits.cols));
  const Tensor r = o.logits.slice_rows(row, 1);
  b_.download(r, logits.data(), r.nbytes());
  std::vector<Sampler::Prob> local;
  std::vector<Sampler::Prob>& d = dist ? *dist : local;
  const bool slots = head && head_.draft_slots() > 0;
  sampler_.distribution(logits.data(), slots ? head_.draft_columns_used() : o.logits.cols, d);
  if (slots)
    for (auto& e : d) e.id = head_.draft_id(e.id);
  return sampler_.draw(d);
}

Token MtpGenerator::oracle_or(Token proposal, size_t index) {
  if (spec_.draft_accept < 0.0 || index >= spec_.oracle.size()) return proposal;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  return u(oracle_rng_) < spec_.draft_accept ? spec_.oracle[index] : proposal;
}

void MtpGenerator::trim_pending() {
  const auto len = static_cast<int64_t>(pend_tokens_.size());
  const int64_t drop = len - kCatchUpRows;
  if (drop <= 0) return;
  // hin_ rows [drop, len] move to [0, len - drop] (ascending, one row at a time: overlap-safe).
  for (int64_t i = 0; i <= len - drop; ++i) b_.copy(hin_.slice_rows(drop + i, 1), hin_.slice_rows(i, 1));
  pend_tokens_.erase(pend_tokens_.begin(), pend_tokens_.begin() + drop);
  head_pos_ += drop;
}

ForwardOutputs MtpGenerator::head_rows_to(Token x, int64_t P) {
  trim_pending();
  pend_tokens_.push_back(x);  // positions head_pos_ .. P
  const auto len = static_cast<int64_t>(pend_tokens_.size());
  if (head_pos_ + len - 1 != P) throw Error("mtp: the head's rows are out of step with the trunk");
  ForwardOutputs o = head_forward(pend_tokens_.data(), len, head_pos_, hin_.slice_rows(0, len), true);
  head_pos_ = P + 1;
  pend_tokens_.clear();
  return o;
}

std::vector<Token> MtpGenerator::draft(Token x, int64_t P, int depth, size_t emitted,
                                       std::vector<std::vector<Sampler::Prob>>* q) {
  const double t0 = now_seconds();
  ForwardOutputs o = head_rows_to(x, P);
  std::vector<Token> d;
  if (q) q->assign(static_cast<size_t>(depth), {});
  for (int i = 0; i < depth; ++i) {
    if (i > 0) {
      // chain: the head's own hidden state (after shared_head_norm), read where the last head
      // step left it (the head reads hidden_prev before it writes its outputs: no copy)
      o = head_forward(&d.back(), 1, P + i, o.hidden, true);
    }
    d.push_back(oracle_or(pick(o, 0, q ? &(*q)[static_cast<size_t>(i)] : nullptr, true), emitted + static_cast<size_t>(i)));
  }
  stats_.head_seconds += now_seconds() - t0;
  return d;
}

void MtpGenerator::oracle_on_device(int row, size_t index) {
  if (spec_.draft_accept < 0.0 || index >= spec_.oracle.size()) return;
  std::uniform_real_distribution<double> u(0.0, 1.0);  // the same draws as oracle_or
  if (u(oracle_rng_) < spec_.draft_accept)  // a device copy from the uploaded continuation: no host data in the cycle
    b_.copy(oracle_dev_.slice_rows(static_cast<int64_t>(index), 1), best_.slice_rows(row, 1));
}

void MtpGenerator::draft_on_device(Token x, int64_t P, int depth, size_t emitted) {
  const double t0 = now_seconds();
  ForwardOutputs o = head_rows_to(x, P);
  const Token placeholder = x;  // any valid id: the row's id comes from best_
  for (int i = 0; i < depth; ++i) {
    if (i > 0) {
      // chain: the head's own hidden state, read in place as above
      o = head_forward(&placeholder, 1, P + i, o.hidden, true, best_.slice_rows(i - 1, 1));
    }
    head_argmax(o.logits.slice_rows(0, 1), best_.slice_rows(i, 1));  // d_{i+1} -> best_ row i
    oracle_on_device(i, emitted + static_cast<size_t>(i));
  }
  stats_.head_seconds += now_seconds() - t0;
}

void MtpGenerator::forecast_verify(Token x, int depth, const std::vector<Token>* drafts) {
  if (fc_ids_.data == nullptr) return;
  const double t0 = now_seconds();
  b_.upload(fc_ids_.slice_rows(0, 1), &x, sizeof(Token));
  if (drafts)
    b_.upload(fc_ids_.slice_rows(1, depth), drafts->data(), static_cast<size_t>(depth) * sizeof(Token));
  else
    b_.copy(best_.slice_rows(0, depth), fc_ids_.slice_rows(1, depth));
  model_.forecast_experts(fc_ids_.slice_rows(0, depth + 1));
  stats_.forecast_seconds += now_seconds() - t0;
}

std::vector<Token> MtpGenerator::run(const std::vector<Token>& prompt, const std::function<bool(Token)>& on_token) {
  const Tokenizer& tok = session_.engine().tokenizer();
  const int64_t n_ctx = session_.n_ctx();
  std::vector<Token> out;
  const std::vector<float>& first = session_.prefill(prompt, opt_.checkpoint_at, prefill_tap());
  Token x = sampler_.sample(first.data(), n_vocab_);
  int64_t P = session_.position();
  session_.set_decode_stats(0, 0.0);
  const double t0 = now_seconds();

  // Emits t (at position pt) as plain decoding would: false when generation ends with it
  // (t itself is emitted unless it is a stop id).
  auto emit = [&](Token t, int64_t pt) {
    if (opt_.stop_at_eog && tok.is_stop(t)) return false;
    out.push_back(t);
    session_.set_decode_stats(static_cast<int64_t>(out.size()), now_seconds() - t0);
    if (on_token && !on_token(t)) return false;
    if (static_cast<int64_t>(out.size()) >= opt_.max_new_tokens) return false;
    return pt < n_ctx;  // plain decoding stops when the context is full
  };
  while (emit(x, P)) {
    const std::optional<Token> next = advance(x, opt_.max_new_tokens - static_cast<int64_t>(out.size()), out.size(), emit);
    if (!next) break;
    x = *next;
    P = session_.position();
  }
  session_.set_decode_stats(static_cast<int64_t>(out.size()), now_seconds() - t0);
  stats_.cycle_estimate.resize(static_cast<size_t>(spec_.draft_max) + 1);
  for (int d = 0; d <= spec_.draft_max; ++d) stats_.cycle_estimate[static_cast<size_t>(d)] = policy_->cycle_seconds(d);
  return out;
}

Session::RowTap MtpGenerator::prefill_tap() {
  return [this](int64_t pos0, const Token* ids, int64_t n, const ForwardOutputs& o) { feed_prompt_rows(pos0, ids, n, o); };
}

bool MtpGenerator::step(Token x, int64_t tokens_left, const EmitFn& emit) {
  const std::optional<Token> next = advance(x, tokens_left, 0, emit);
  return next && emit(*next, session_.position());
}

void MtpGenerator::note_plain_step(Token x, const Tensor& hidden_row) {
  const int64_t P = session_.position() - 1;  // x's row
  // flush_pending is a forward of the head's own model: the trunk's hidden_row stays valid
  if (static_cast<int64_t>(pend_tokens_.size()) + 2 > rows_) flush_pending();
  if (head_pos_ + static_cast<int64_t>(pend_tokens_.size()) != P) {
    // The head is not at x (a prompt it was not fed): it restarts at P with h_{P-1} unknown (0),
    // as after a new prompt; the drafts may be worse for a while, the output is the trunk's.
    const std::vector<float> zeros(static_cast<size_t>(dim_), 0.0f);
    b_.upload(hin_.slice_rows(0, 1), zeros.data(), zeros.size() * sizeof(float));
    pend_tokens_.clear();
    head_pos_ = P;
  }
  b_.copy(hidden_row, hin_.slice_rows(P + 1 - head_pos_, 1));  // h_P
  pend_tokens_.push_back(x);
}

std::optional<Token> MtpGenerator::advance(Token x, int64_t tokens_left, size_t emitted, const EmitFn& emit) {
  const bool greedy = opt_.sampling.temperature <= 0.0f;
  const int64_t n_ctx = session_.n_ctx();
  const int64_t P = session_.position();
  const int64_t room = std::min<int64_t>({spec_.draft_max, session_.state().max_chunk() - 1, n_ctx - P - 1, tokens_left - 1});
  const int depth = policy_->next(static_cast<int>(std::max<int64_t>(0, room)));
  if (depth == 0) {  // a plain step; the head's pending rows grow by one
    const double ts = now_seconds();
    const ForwardOutputs o = session_.append({x});
    note_plain_step(x, o.hidden);
    const Token next = pick(o, 0, nullptr);
    policy_->observe_cycle(0, now_seconds() - ts);
    ++stats_.plain_steps;
    ++stats_.cycles_at[0];
    return next;
  }
  const double th = now_seconds();
  AppendOptions ao;
  ao.all_outputs = true;
  ao.snapshots = true;
  ForwardOutputs o;
  std::vector<Token>& d = c_d_;
  std::vector<int32_t>& a = c_a_;
  if (greedy) {
    // Drafts, verify and argmaxes on the device; one download per cycle: the drafts d_1..d_N
    // (best_ rows 0..N-1) and the trunk's argmaxes a_0..a_N (rows N..2N).
    draft_on_device(x, P, depth, emitted);
    forecast_verify(x, depth, nullptr);
    const std::vector<Token> rows(static_cast<size_t>(depth + 1), x);  // rows 1..N: ids from best_
    ao.ids_from = best_.slice_rows(0, depth);
    ao.ids_row0 = 1;
    o = session_.append(rows, ao);  // verify: depth + 1 rows at P
    b_.argmax(o.logits, best_.slice_rows(depth, depth + 1));
    c_ids_.resize(static_cast<size_t>(2 * depth + 1));
    b_.download(best_.slice_rows(0, 2 * depth + 1), c_ids_.data(), c_ids_.size() * sizeof(int32_t));
    d.assign(c_ids_.begin(), c_ids_.begin() + depth);
    a.assign(c_ids_.begin() + depth, c_ids_.end());
    session_.set_tokens(P + 1, d.data(), depth);
  } else {
    d = draft(x, P, depth, emitted, &c_q_);
    forecast_verify(x, depth, &d);
    std::vector<Token> rows{x};
    rows.insert(rows.end(), d.begin(), d.end());
    o = session_.append(rows, ao);  // verify: depth + 1 rows at P
  }
  int j = 0;
  Token next = 0;
  if (greedy) {
    while (j < depth && d[static_cast<size_t>(j)] == a[static_cast<size_t>(j)]) ++j;
    next = a[static_cast<size_t>(j)];
  } else {  // speculative sampling: accept d_i with probability min(1, p/q), else the residual
    std::vector<float>& logits_host = c_logits_;
    std::vector<Sampler::Prob>& p = c_p_;
    logits_host.resize(static_cast<size_t>(n_vocab_ * (depth + 1)));
    b_.download(o.logits, logits_host.data(), o.logits.nbytes());
    bool rejected = false;
    for (; j < depth; ++j) {
      sampler_.distribution(logits_host.data() + static_cast<size_t>(j) * n_vocab_, n_vocab_, p);
      const auto& qj = c_q_[static_cast<size_t>(j)];
      const Token dj = d[static_cast<size_t>(j)];
      const double pd = prob_of(p, dj), qd = std::max(prob_of(qj, dj), 1e-30f);
      if (sampler_.uniform() < std::min(1.0, pd / qd)) continue;
      std::vector<Sampler::Prob> resid;  // max(0, p - q), normalised
      double sum = 0.0;
      for (const auto& e : p) {
        const double r = e.p - prob_of(qj, e.id);
        if (r > 0.0) {
          resid.push_back({e.id, static_cast<float>(r)});
          sum += r;
        }
      }
      if (sum <= 0.0) {
        next = sampler_.draw(p);
      } else {
        for (auto& e : resid) e.p = static_cast<float>(e.p / sum);
        next = sampler_.draw(resid);
      }
      rejected = true;
      break;
    }
    if (!rejected) {
      sampler_.distribution(logits_host.data() + static_cast<size_t>(depth) * n_vocab_, n_vocab_, p);
      next = sampler_.draw(p);
    }
  }
  policy_->observe_cycle(depth, now_seconds() - th);
  ++stats_.cycles;
  ++stats_.cycles_at[static_cast<size_t>(depth)];
  stats_.drafted += depth;
  stats_.accepted += j;
  for (int i = 0; i < depth; ++i) ++stats_.drafted_at[static_cast<size_t>(i)];
  for (int i = 0; i < j; ++i) ++stats_.accepted_at[static_cast<size_t>(i)];
  policy_->record(depth, j);
  // The head's next rows: d_1..d_j at P+1.. with the trunk's own h_P..h_{P+j-1}, then the
  // next token with h_{P+j}: verify hidden rows 0..j.
  b_.copy(o.hidden.slice_rows(0, j + 1), hin_.slice_rows(0, j + 1));
  pend_tokens_.assign(d.begin(), d.begin() + j);
  // Emit the accepted drafts; generation may end inside them as plain decoding would.
  int64_t keep = P + j + 1;  // trunk rows to keep: x, d_1..d_j
  bool ended = false;
  for (int i = 0; i < j && !ended; ++i) {
    if (!emit(d[static_cast<size_t>(i)], P + 1 + i)) {
      keep = P + 1 + i;
      ended = true;
    }
  }
  session_.rewind(keep);  // selects the snapshot slot: no replay
  if (ended) return std::nullopt;
  return next;
}

std::vector<Token> generate(Session& session, const std::vector<Token>& prompt, const GenerateOptions& opt,
                            const SpecOptions& spec, const std::function<bool(Token)>& on_token, SpecStats* stats) {
  const bool can = spec.mode == SpecMode::MTP && session.engine().model().mtp() != nullptr &&
                   (session.state().rewindable() || session.state().max_snapshots() >= spec.draft_max + 1);
  if (!can) {
    std::vector<Token> out = session.generate(prompt, opt, on_token);
    return out;
  }
  MtpGenerator gen(session, opt, spec);
  std::vector<Token> out = gen.run(prompt, on_token);
  session.mark_turn_end();
  if (stats) *stats = gen.stats();
  return out;
}

}  // namespace df::spec
