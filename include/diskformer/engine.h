// diskformer public C++ API: load a GGUF model, open sessions, generate.
//
//   auto engine = df::Engine::load({.model_path = "model.gguf", .device = "auto", .cpu = {.threads = 4}});
//   df::Session s(*engine);
//   auto ids = engine->tokenizer().encode("Hello", true);
//   s.generate(ids, {}, [&](df::Token t) { ...; return true; });
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "models/model.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace df {

namespace gguf {
class File;
}

struct EngineOptions {
  std::string model_path;
  // A GGUF file holding an MTP head (blk.<n_layer>.nextn.* and its block) for the model, e.g.
  // written by `diskformer pull SPEC --tensors 'blk.64.*'`: replaces the model's own head, or
  // gives a trunk without nextn layers speculative decoding. Empty: the model file's head.
  std::string mtp_head_path;
  // The MTP head drafts from token ids [0, draft_vocab) only (MtpHead::set_draft_vocab: a draft
  // step reads that share of the output projection; the output is the trunk's whatever it is).
  // 0: the whole vocabulary.
  int64_t draft_vocab = 0;
  // With draft_vocab: the head also scores the tokens with ids >= draft_vocab that the context
  // holds (prompt and generated tokens), in this many slots (0: none; models/draft_vocab.h).
  int64_t draft_context = 0;
  std::string device = "auto";  // cpu | cuda | auto (make_backend)
  CpuBackendOptions cpu;        // CPU backend only: threads, isa, repack, expert stats
  int64_t n_ctx = 4096;        // positions a session holds (capped by nothing; memory is the limit)
  int64_t prefill_chunk = 0;   // tokens per forward pass during prefill (0: the backend's default, 512 CPU, 2048 CUDA)
  bool kv_f32 = false;         // F16 KV cache unless set
  bool graphs = true;          // replay repeated decode steps as device graphs (CUDA)
  // Greedy decode (GreedySteps: PlainGenerator, bench): the step that appends the next id is
  // queued before the host reads that id (the step reads it on the device), so the device
  // does not idle through the host's round trip between steps. 0 off, 1 auto (where the
  // backend is asynchronous: CUDA), 2 on (every backend). Default auto (H100, stop 29: +3 % on
  // the default model, +0.5 % on 4B Q4_0 / Q8_0; docs/cuda_backend.md "Stop 29").
  int decode_lookahead = 1;
  bool fuse = true;            // fused ops (norm into matvecs, ...) in fewer launches (CUDA)
  bool mv_exact = false;       // CUDA decode matvecs with f32 activations (no int8 rounding)
  bool pdl = true;             // CUDA kernels with programmatic dependent launch
  bool lean_kernels = true;    // CUDA decode step's small kernels lean (CudaOptions::lean_kernels)
  bool moe_legacy = false;     // CUDA MoE: the stop-19 path (host-grouped prefill, f32-x experts)
  // CUDA paths whose bits equal the paths they replace (df_cuda_tests on the H200, stop 20);
  // on at the engine level (CudaOptions keeps them off for tests of the plain kernels).
  bool cuda_moe_warp_route = true;       // CudaOptions::moe_warp_route
  bool cuda_float_norm_prologue = true;  // CudaOptions::float_norm_prologue
  bool cuda_fuse_deltanet = true;        // CudaOptions::fuse_deltanet
  bool cuda_moe_pdl = true;              // CudaOptions::moe_pdl (df_cuda_tests on the H200, helper moe4)
  bool cuda_moe_gemm = true;             // CudaOptions::moe_gemm (df_cuda_tests on the H200, helper moegemm)
  bool cuda_copy_kernels = false;        // CudaOptions::copy_kernels: small copies / uploads by kernels (off: measured slower on an H100, stop 38)
  bool cuda_copy_batch = true;           // CudaOptions::copy_batch: a state's copies in one launch (H100, stop 29)
  // CudaOptions::gdn_prefill: the DeltaNet prefill's delta rule, 0 token kernel, 1 chunked f32
  // ("v1"), 2 chunked tensor cores tf32, 3 chunked tensor cores 3xTF32 (helper gdnpre).
  int cuda_gdn_prefill = 3;
  bool mv_pipe = true;         // CUDA int8-x decode matvecs with their loads pipelined (false: the stop-19 kernel)
  bool cuda_attn_v1 = false;   // --device cuda: decode attention by the v1 kernel (one block per query head)
  bool cuda_fuse_qk_attention = true;  // --device cuda: q/k norm + RoPE + KV store inside the attention launch
  bool cuda_attn_wide = false;  // --device cuda: the GQA attention kernel with 256 threads (not yet measured)
  int64_t cuda_gemm_min_rows = 8;  // --device cuda: matmuls of 9..N rows by the matvec, more by the GEMM
  int64_t cuda_moe_gemm_min_rows = 8;  // --device cuda: routed experts of 9..N rows by the grouped matvec, more by the GEMM
  bool cuda_fuse_attn_gate = true;  // --device cuda: qwen35's gate split and sigmoid inside the attention launch
  bool mv_pipe_rows = true;    // and so at 2..8 rows (a speculative verify; false: those run the stop-19 loop)
  // CUDA matvec weights prefetched into L2 before each launch's griddepcontrol.wait, up to
  // cuda_l2_prefetch_mb MiB a launch (CudaOptions::l2_prefetch_bytes; same bits); cuda_mv_blocks_per_sm > 0
  // caps the matvec's persistent grid per SM (CudaOptions::mv_blocks_per_sm).
  bool cuda_l2_prefetch = false;
  int64_t cuda_l2_prefetch_mb = 24;
  int cuda_mv_blocks_per_sm = 0;
  // CUDA n = 1 int8-x matvecs of short rows with their loads pipelined 2 or 4 steps ahead (0: off;
  // same bits; helper moedec): the routed experts' launches (CudaOptions::moe_pipe, default 2 since
  // stop 24) and the other matvecs whose rows have at most 64 parts (CudaOptions::mv_short_pipe,
  // default 0: on the H200 at stop 25 it measured 1.2 % slower on the 35B-A3B shape and no
  // different on the default model, alternating runs).
  int cuda_moe_pipe = 2;
  int cuda_mv_short_pipe = 0;
  // CUDA int8-x matvecs without a norm prologue copy x into shared memory by cp.async (one
  // round trip) before rounding it, instead of rounding from global memory in steps
  // (CudaOptions::mv_stage_x; the same bits). Default off until measured in the decode step.
  bool cuda_mv_stage_x = false;
  int cuda_mv_cluster = 0;
  int64_t cuda_mv_preround = 12288;
  // CUDA prefill (more than 16 rows): F32 weights by FP32 cuBLAS (CudaOptions::prefill_sgemm)
  // instead of the f16 tile kernel.
  bool cuda_prefill_sgemm = true;
  // CUDA streamed experts (expert cache) take the resident stacks' decode launches: the fused
  // expert block at one row, the routed launches with the pipe and PDL (CudaOptions::moe_streamed_fused).
  bool cuda_moe_streamed_fused = true;
  int64_t expert_cache_mb = -1;  // CUDA, MoE models: BackendOptions::cuda_expert_cache_mb
  std::string expert_source = "auto";  // CUDA, MoE models: BackendOptions::cuda_expert_source
  int64_t gpu_mem_bytes = 0;     // CUDA: BackendOptions::cuda_gpu_mem_bytes
  // Checkpoints of recurrent state (hybrid models; pure-attention models rewind their KV
  // cache to any position and keep none). A session keeps one at the end of each prompt and
  // of each generation, and one every `checkpoint_every` tokens (0: none), at most
  // `max_checkpoints` (the oldest periodic ones are dropped first).
  int64_t checkpoint_every = 0;
  int max_checkpoints = 4;
  // Rows a rollback without replay may span (Session::append with snapshots, then rewind):
  // recurrent-state slots each session keeps (0: none; speculative decoding sets k + 1).
  int64_t max_snapshots = 0;
  std::function<void(double)> on_progress;  // load progress in [0, 1]
};

struct GenerateOptions {
  SamplerOptions sampling;
  int64_t max_new_tokens = 128;
  bool stop_at_eog = true;     // stop on the model's end-of-turn / end-of-text ids
  // Prompt positions to keep a recurrent-state checkpoint at (hybrid models), e.g. where a
  // chat's history ends: the next turn re-renders the answer differently from the generated
  // tokens, and restarts from there instead of from the start.
  std::vector<int64_t> checkpoint_at;
};

struct Stats {
  int64_t prompt_tokens = 0;     // tokens in the last prompt
  int64_t reused_tokens = 0;     // of those, taken from the cache
  int64_t prefilled_tokens = 0;  // of those, computed
  int64_t generated_tokens = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// The start-up cost table of speculative decoding (MtpGenerator), measured on the running
// machine with this engine's backend and options: seconds of a trunk forward of k = 1..K rows
// (k = 1: a plain step; k > 1: a verify with snapshots, every row's argmax), of one chained
// head row and of a head catch-up forward. Measured once per engine, kept for its lifetime.
struct SpecCosts {
  std::vector<double> verify;     // [K], K = the deepest draft it was measured for + 1
  double head = 0.0;
  double head_catchup = 0.0;
  double measure_seconds = 0.0;   // wall time the measurement took
};

class Engine {
 public:
  static std::unique_ptr<Engine> load(const EngineOptions& opt);
  ~Engine();
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelInfo& info() const { return model_->info(); }
  Model& model() { return *model_; }
  Backend& backend() { return *backend_; }
  const gguf::File& file() const { return *file_; }
  const EngineOptions& options() const { return opt_; }
  std::string backend_name() const;
  // The kept cost table measured for a deepest draft of at least `draft_max` (its verify
  // entries cut to draft_max + 1 rows), if one was measured. Thread-safe.
  std::optional<SpecCosts> spec_costs(int draft_max) const;
  // Keeps `c` (measured for a deepest draft of c.verify.size() - 1) for later sessions.
  void keep_spec_costs(SpecCosts c);

 private:
  Engine() = default;
  mutable std::mutex costs_mu_;
  std::map<int, SpecCosts> spec_costs_;  // by the deepest draft measured
  EngineOptions opt_;
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<gguf::File> head_file_;  // EngineOptions::mtp_head_path (the head's weights point into it)
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
};

// A session's position saved by Session::capture(): its tokens, the model state that the KV
// cache cannot recover, and the logits after the last token.
struct SessionCheckpoint {
  std::vector<Token> tokens;
  std::shared_ptr<const StateCheckpoint> state;
  std::vector<float> logits;
};

struct AppendOptions {
  bool all_outputs = false;  // outputs (hidden state, logits) for every row, else the last row only
  bool logits = true;        // compute logits (false: hidden states only)
  bool snapshots = false;    // keep the recurrent state after each row, so that rewind() into
                             // these rows needs no replay (rows <= EngineOptions::max_snapshots)
  bool row_exact = true;     // each row's bits as a one-row forward gives them (decode, verify);
                             // false: prompt kernels (ForwardOptions::row_exact)
  // Rows [ids_row0, ids_row0 + ids_from.rows) take their ids from this device I32 [k, 1]
  // tensor (ForwardOptions::ids_from; `tokens` holds placeholders there). The caller names
  // the real ids with set_tokens() before the session uses them (rewind, prefix reuse).
  Tensor ids_from{};
  int64_t ids_row0 = 0;
};

// One conversation: the model state (KV cache, recurrent state) and the tokens it holds; the
// one owner of the sequence's position. A new prompt that shares a prefix with the cached
// tokens only computes the rest: from the shared position itself on pure-attention models,
// from the nearest checkpoint at or before it on models with recurrent layers.
class Session {
 public:
  explicit Session(Engine& engine);
  // With `max_snapshots` recurrent-state slots instead of EngineOptions::max_snapshots
  // (speculative decoding asks for its deepest draft + 1).
  Session(Engine& engine, int64_t max_snapshots);
  int64_t n_ctx() const { return state_->n_ctx(); }
  int64_t position() const { return static_cast<int64_t>(tokens_.size()); }
  const std::vector<Token>& tokens() const { return tokens_; }
  uint64_t cache_bytes() const { return state_->cache_bytes(); }
  uint64_t scratch_bytes() const { return engine_.model().scratch_bytes(); }
  Engine& engine() { return engine_; }
  ModelState& state() { return *state_; }

  // ---- the step API (generators build on it) ----
  // Runs `tokens` at position() in one forward (at most the prefill chunk of rows) and returns
  // the device outputs (valid until the next forward on this engine's model).
  ForwardOutputs append(const std::vector<Token>& tokens, const AppendOptions& opt = {});
  // Makes the session hold its first `pos` tokens (pos <= position()). Pure attention: any
  // position (the KV cache truncates). Recurrent: inside the last append with snapshots by
  // selecting its slot (no replay); otherwise from the nearest checkpoint at or before pos,
  // recomputing the tokens after it (or from position 0).
  void rewind(int64_t pos);
  // The ids of rows [pos0, pos0 + n) of the last append, learned after it (rows whose ids
  // came from AppendOptions::ids_from): replaces their placeholders in the session's record.
  void set_tokens(int64_t pos0, const Token* ids, int64_t n);
  // Host copy of output row i's logits.
  std::vector<float> download_logits(const ForwardOutputs& out, int64_t i);
  // Several sessions of one engine advanced together (the server's decode step): appends
  // tokens[i] to sessions[i] at its position, all in ONE forward over their states. Output
  // row i holds session i's hidden state and logits. Throws df::Error when a session's
  // context is full, the sessions repeat or belong to other engines.
  static ForwardOutputs append_each(std::span<Session* const> sessions, std::span<const Token> tokens);

  // ---- whole prompts (CLI, tests) ----
  // prefill, logits_all (and a rewind's recompute) run prompt kernels (row_exact off, as
  // llama.cpp's batched path); append and decode run row-exact forwards.
  // Makes the cache hold exactly `prompt` and returns the logits after its last token.
  // Throws df::Error when the prompt is empty or longer than the context.
  // checkpoint_at: positions to keep a checkpoint at on the way (see GenerateOptions).
  // tap (optional): called after each forward of the prompt's computed rows with their
  // device outputs (hidden states of every row; logits of the last row of the last chunk),
  // e.g. to feed a draft head.
  using RowTap = std::function<void(int64_t pos0, const Token* ids, int64_t n, const ForwardOutputs& out)>;
  const std::vector<float>& prefill(const std::vector<Token>& prompt, const std::vector<int64_t>& checkpoint_at = {},
                                    const RowTap& tap = {});
  // Appends one token and returns the logits after it.
  const std::vector<float>& decode(Token t);
  // Logits of every position of `tokens` ([n, n_vocab] row-major), computed from position 0.
  std::vector<float> logits_all(const std::vector<Token>& tokens);
  // Prefills `prompt`, then samples until max_new_tokens, a stop id, the end of the context,
  // or on_token returning false (a PlainGenerator). Returns the generated ids (a stop id is
  // not included).
  std::vector<Token> generate(const std::vector<Token>& prompt, const GenerateOptions& opt,
                              const std::function<bool(Token)>& on_token);
  const Stats& stats() const { return stats_; }
  void set_decode_stats(int64_t generated, double seconds) {
    stats_.generated_tokens = generated;
    stats_.decode_seconds = seconds;
  }

  // Saves the current position (its logits are those of the last prefill/decode).
  SessionCheckpoint capture();
  // Returns to a position captured from this session. Throws df::Error when the KV cache no
  // longer holds that position's tokens (a later prompt diverged before its end).
  void restore(const SessionCheckpoint& c);
  // Positions of the checkpoints the session keeps for prefix reuse, ascending.
  std::vector<int64_t> checkpoint_positions() const;
  // Keeps a checkpoint of the state at position() (recurrent models: an end of turn).
  void mark_turn_end();

 private:
  enum class CheckpointKind { PERIODIC, PROMPT, TURN, MARK };
  struct Kept {
    int64_t pos;
    CheckpointKind kind;
    std::shared_ptr<const StateCheckpoint> state;
  };
  // One forward of ids at position pos0 (the state's position), keeping cache_tokens_ and
  // tokens_ right.
  ForwardOutputs step(const Token* ids, int64_t n, int64_t pos0, bool all_outputs, bool last_output,
                      const ForwardOptions& fo);
  // Runs ids at positions pos0.. through the model in chunks (split at periodic checkpoint
  // positions); out (when not null) receives the logits of every row (all_logits) or of the
  // last row.
  void run(const Token* ids, int64_t n, int64_t pos0, bool all_logits, float* out,
           const std::vector<int64_t>& marks = {}, const RowTap& tap = {});
  // KV rows [pos0, pos0 + n) now hold ids: update cache_tokens_, drop checkpoints that no
  // longer match.
  void note_written(int64_t pos0, const Token* ids, int64_t n);
  // Keeps a checkpoint of the state after tokens_ (recurrent models only).
  void keep_checkpoint(int64_t pos, CheckpointKind kind);

  Engine& engine_;
  std::unique_ptr<ModelState> state_;
  std::vector<Token> tokens_;        // what the model state has consumed (state position)
  std::vector<Token> cache_tokens_;  // what the KV rows hold; tokens_ is a prefix of it
  std::vector<Kept> checkpoints_;    // ascending positions, each a prefix of cache_tokens_
  int64_t snap_pos0_ = -1, snap_n_ = 0;  // the last append with snapshots (rows [pos0, pos0 + n))
  std::vector<float> logits_;
  Stats stats_;
};

}  // namespace df
