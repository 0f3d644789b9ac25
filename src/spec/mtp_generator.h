// Speculative generation with the model's MTP ("nextn") head as the drafter, over the Session
// step API (append rows -> device outputs, rewind). Output is token-identical to plain greedy
// decoding (and, with temperature > 0, equal in distribution to plain sampling): every emitted
// token is the trunk's own choice from the verify pass; drafts only decide how many of the
// verify rows are kept.
//
// One cycle at trunk position P with the next token x (not yet in the trunk):
//   1. draft: the head runs its pending rows (positions head_pos..P: token x_p with the trunk's
//      hidden state h_{p-1}) and gives d_1 and its own hidden g_1; depth N chains the head on
//      (d_i, g_i) at positions P+i.
//   2. verify: the trunk appends [x, d_1..d_N] in one forward with recurrent snapshots, argmax
//      of every row on the device -> a_0..a_N; j = the longest prefix with d_{i+1} == a_i.
//   3. accept: the trunk rewinds to P + j + 1 (selects snapshot slot j + 1: no replay); the
//      emitted tokens are d_1..d_j and then a_j (the trunk's next token).
//   4. the head's rows P+1..P+j are re-run in the next cycle's step 1 with the trunk's own
//      hidden states (verify rows 0..j), as llama.cpp keeps its MTP cache.
// Depth 0 is a plain step (the head's pending rows grow; the last few are fed in one batch at
// the next draft).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "diskformer/engine.h"
#include "spec/depth_policy.h"
#include "spec/spec_options.h"

namespace df::spec {

class MtpGenerator {
 public:
  // The session must keep at least spec.draft_max + 1 snapshot slots (Session's max_snapshots)
  // and its model must have an MTP head (df::Error otherwise). Measures the cost table when
  // the engine has none for this depth yet (Engine::spec_costs).
  MtpGenerator(Session& session, const GenerateOptions& opt, const SpecOptions& spec);
  ~MtpGenerator();
  // As PlainGenerator::run. May be called again for the next turn of the same session (the
  // head's cache is kept; opt may change all but its sampling options).
  std::vector<Token> run(const std::vector<Token>& prompt, const std::function<bool(Token)>& on_token);
  std::vector<Token> run(const std::vector<Token>& prompt, const GenerateOptions& opt,
                         const std::function<bool(Token)>& on_token) {
    opt_ = opt;
    return run(prompt, on_token);
  }
  const SpecStats& stats() const { return stats_; }

  // ---- step by step (the server's scheduler: a slot's generation among others) ----
  // emit(t, pt): hands over the token t generated at position pt (the session's position
  // when plain decoding would emit it); false: generation ends with t.
  using EmitFn = std::function<bool(Token, int64_t)>;
  // The session's prefill tap that feeds the head the prompt's rows (Session::prefill).
  Session::RowTap prefill_tap();
  // x: the token generated last (emitted, not yet in the session). Runs one cycle of at most
  // tokens_left tokens (a plain step or draft + verify, as the depth policy picks) and emits
  // what it generates, the trunk's next token last. False when an emit returned false; the
  // session then holds what plain decoding would hold at that token.
  bool step(Token x, int64_t tokens_left, const EmitFn& emit);
  // The caller appended x to the session in a forward of its own (a batched step of several
  // sessions; advance's own plain steps); hidden_row [1, dim]: that forward's hidden state of
  // x's row. The head takes it as a pending row.
  void note_plain_step(Token x, const Tensor& hidden_row);

 private:
  // The start-up cost table: the engine's kept one, else measured now (measure_cost_table) and
  // kept in the engine for later generators.
  // One step from the session's position P with x next: a plain step or a cycle. Emits the
  // accepted drafts; returns the trunk's next token (not emitted), or nothing when an emit
  // ended generation. emitted: tokens generated so far (--draft-accept's oracle index).
  std::optional<Token> advance(Token x, int64_t tokens_left, size_t emitted, const EmitFn& emit);
  void measure_costs();
  SpecCosts measure_cost_table();
  // Prefill tap: feeds the head the prompt rows the trunk computed.
  void feed_prompt_rows(int64_t pos0, const Token* ids, int64_t n, const ForwardOutputs& out);
  // Runs the head over its pending rows (without the draft row): catch-up when they fill up.
  void flush_pending();
  // Before a draft after a plain stretch: only the last kCatchUpRows pending rows are run (the
  // head's rows before them stay stale: a cheaper probe, drafts a little worse, output unchanged).
  void trim_pending();
  // 7: with the draft row, the catch-up is a head forward of 8 rows, a graph-recordable shape.
  static constexpr int64_t kCatchUpRows = 7;
  // The head rows of a typical catch-up after a verify (x and about two accepted drafts): the
  // start-up cost table's guess.
  static constexpr int64_t kCatchUpGuess = 3;
  // Step 1 (sampling: on the host): the draft tokens d_1..d_depth after x at position P; `emitted` tokens so far
  // (the oracle's index); q (sampling) receives each draft's distribution.
  std::vector<Token> draft(Token x, int64_t P, int depth, size_t emitted, std::vector<std::vector<Sampler::Prob>>* q);
  // Greedy step 1 on the device: d_{i+1} = the device argmax of the head's logits, written to
  // best_ row i; the next head step reads its id from there (ForwardOptions::ids_from). No id
  // crosses to the host while drafting; the verify reads best_ rows 0..depth-1 likewise.
  void draft_on_device(Token x, int64_t P, int depth, size_t emitted);
  // The oracle of --draft-accept on the device: with probability P, best_ row `row` becomes
  // the known continuation (the same random draws as oracle_or).
  void oracle_on_device(int row, size_t emitted_index);
  // Before a draft: the head over its (trimmed) pending rows and x at P, outputs for x's row;
  // then nothing is pending and the head is at P + 1.
  ForwardOutputs head_rows_to(Token x, int64_t P);
  // Whether a head forward of n rows runs the row-exact kernels (the faster ones, per backend).
  bool head_row_exact(int64_t n) const;
  static constexpr int64_t kHeadExactRows = 8;
  // A head forward of n rows at pos0 with hidden [n, dim]; outputs for the last row if asked;
  // ids_from (non-empty): the rows' ids from that device tensor.
  ForwardOutputs head_forward(const Token* ids, int64_t n, int64_t pos0, const Tensor& hidden, bool output,
                              const Tensor& ids_from = {});
  // Output row `row` of o: its argmax on the device (greedy) or a draw (dist: the distribution).
  // head: o is the head's (its drafting columns map to token ids), else the trunk's.
  Token pick(const ForwardOutputs& o, int64_t row, std::vector<Sampler::Prob>* dist, bool head = false);
  // out = the head's greedy drafts of its logits rows (token ids) on the device.
  void head_argmax(const Tensor& logits, const Tensor& out);
  Token oracle_or(Token proposal, size_t emitted_index);
  // Once a cycle's drafts are known, before its verify: the model's routing forecast from the
  // verify rows' tokens x, d_1..d_depth (Model::forecast_experts; drafts: the host's, else
  // best_ rows 0..depth-1), where the backend acts on one (a MoE model's experts from disk).
  void forecast_verify(Token x, int depth, const std::vector<Token>* drafts);

  Session& session_;
  GenerateOptions opt_;
  SpecOptions spec_;
  Model& model_;
  MtpHead& head_;
  Backend& b_;
  int64_t dim_ = 0, n_vocab_ = 0, rows_ = 0;
  std::unique_ptr<ModelState> head_state_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor hin_;     // [rows_, dim] head input hidden states: row i is h_{head_pos_ + i - 1}
  Tensor g_;       // [1, dim] the head's own hidden state when chaining drafts
  Tensor best_;    // [rows_, 1] i32 device argmax (greedy cycle: drafts, then the verify's argmaxes)
  Tensor oracle_dev_;  // [oracle, 1] i32 --draft-accept's known continuation on the device
  Tensor fc_ids_;      // [rows_, 1] i32 the verify's rows for forecast_verify (where the backend wants it)
  int64_t head_pos_ = 0;            // the head's next row position (rows below are written)
  std::vector<Token> pend_tokens_;  // tokens at positions head_pos_.. not yet run by the head
  std::unique_ptr<DepthPolicy> policy_;
  Sampler sampler_;
  std::mt19937_64 oracle_rng_;
  SpecStats stats_;
  // a cycle's scratch: drafts, the trunk's argmaxes, their download, sampling's distributions
  std::vector<Token> c_d_;
  std::vector<int32_t> c_a_, c_ids_;
  std::vector<std::vector<Sampler::Prob>> c_q_;
  std::vector<float> c_logits_;
  std::vector<Sampler::Prob> c_p_;
  bool cpu_ = false;  // the CPU backend (the head's row-exact kernels up to kHeadExactRows rows)
};

// Generates with MTP speculation when `spec` asks for it and the session's model has a head
// (and snapshot slots), plain decoding otherwise. `stats` (optional) receives the spec figures.
std::vector<Token> generate(Session& session, const std::vector<Token>& prompt, const GenerateOptions& opt,
                            const SpecOptions& spec, const std::function<bool(Token)>& on_token,
                            SpecStats* stats = nullptr);

}  // namespace df::spec
