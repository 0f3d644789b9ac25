// The architecture-independent model interface. An architecture (one file each: qwen3.cpp,
// qwen35.cpp) reads its hyperparameters and weights from a GGUF file, creates per-sequence
// state (KV cache, recurrent state) and runs a forward pass over a batch of rows of one or
// several sequences on a Backend, leaving the chosen rows' outputs on the device.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace df::gguf {
class File;
}

namespace df {

struct ModelInfo {
  std::string arch;          // general.architecture
  std::string name;          // general.name (may be empty)
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;
  bool tied_output = false;
  // Hybrid models (qwen35): layers with a recurrent state instead of a KV cache.
  int64_t n_layer_recurrent = 0;   // Gated DeltaNet layers among the n_layer trunk layers
  int64_t n_layer_nextn = 0;       // MTP (next-n prediction) layers stored after the trunk
  int64_t ssm_conv_kernel = 0;
  int64_t ssm_state = 0;           // head size of the delta rule (state is ssm_state^2 per head)
  int64_t ssm_k_heads = 0;
  int64_t ssm_v_heads = 0;
  // Mixture-of-experts FFNs (qwen35moe).
  int64_t n_expert = 0;            // routed experts per layer (0: dense MLP)
  int64_t n_expert_used = 0;       // experts each token is routed to
  int64_t n_ff_exp = 0;            // FF length of one expert
  int64_t n_ff_shexp = 0;          // FF length of the shared expert
  uint64_t weight_bytes = 0;       // bytes of all weights
  uint64_t bytes_per_token = 0;    // weight bytes read by one decode step
  uint64_t n_params = 0;
};

struct StateOptions {
  int64_t n_ctx = 4096;       // positions the caches hold
  int64_t max_chunk = 512;    // most rows one forward() call takes (the model's workspace grows to it)
  bool kv_f32 = false;        // F16 KV cache unless set
  // Recurrent layers: slots for the state after each of up to this many rows of one forward
  // (ForwardOptions::snapshots), so that accept() rolls back without replay. 0: none.
  int64_t max_snapshots = 0;
  // Checkpoint buffers preallocated by the state (capture() uses one each; 0: allocated
  // when capture() is called without a free buffer).
  int max_checkpoints = 0;
  // Repeated decode-shaped forwards of this state are recorded once as device graphs and
  // replayed (where the backend has graphs: CUDA); false runs every op eagerly.
  bool graphs = true;
};

// A batch of rows for Model::forward: row i is token `token[i]` at position `pos[i]` of the
// sequence whose state is `states[seq[i]]`. The rows of one sequence are contiguous and their
// positions consecutive and ascending. `output[i] != 0` asks for row i's hidden state and
// logits.
struct Batch {
  std::vector<int32_t> token;   // [n]
  std::vector<int32_t> pos;     // [n]
  std::vector<int32_t> seq;     // [n]
  std::vector<uint8_t> output;  // [n]

  int64_t size() const { return static_cast<int64_t>(token.size()); }
  void clear() { token.clear(); pos.clear(); seq.clear(); output.clear(); }
  void add(int32_t tok, int32_t p, int32_t s, bool out) {
    token.push_back(tok);
    pos.push_back(p);
    seq.push_back(s);
    output.push_back(out ? 1 : 0);
  }
  // n tokens of sequence `s` at positions pos0.. ; outputs for the last row or every row.
  static Batch sequence(const int32_t* tokens, int64_t n, int64_t pos0, bool all_outputs, bool last_output = true,
                        int32_t s = 0);
};

struct ForwardOptions {
  bool logits = true;       // compute the output rows' logits (false: hidden states only)
  // With logits: compute them for the last output row only (hidden states for every output
  // row), e.g. a prefill whose hidden states feed a draft head.
  bool logits_last = false;
  // Recurrent layers keep the state after each row of each sequence in the state's slots
  // (a sequence may then have at most StateOptions::max_snapshots rows); see accept().
  bool snapshots = false;
  // Row-exact kernels (Backend::set_row_exact): each row gets the bits a one-row forward
  // gives it (decode, speculative verify). false: prompt prefill, where multi-row kernels in
  // llama.cpp's batched summation order may be used.
  bool row_exact = true;
  // Rows [ids_row0, ids_row0 + ids_from.rows) take their token ids from this device I32
  // tensor [k, 1] (written by earlier ops: a draft's device argmax) instead of Batch::token,
  // which holds placeholders there (any valid id): the ids never cross to the host. Empty:
  // every id from Batch::token.
  Tensor ids_from{};
  int64_t ids_row0 = 0;
};

// Device tensors, valid until the next forward on this model (they live in the model's
// workspace). Empty tensors (data == nullptr) when no row asked for output.
struct ForwardOutputs {
  Tensor hidden;              // [n_out, n_embd] f32: final hidden state after output_norm
  Tensor logits;              // [n_out, n_vocab] f32 (empty unless ForwardOptions::logits;
                              // [1, n_vocab], the last output row's, with logits_last)
  std::vector<int32_t> rows;  // batch row of each output row, ascending
  int64_t n_out() const { return static_cast<int64_t>(rows.size()); }
};

// A copy of the part of a session's state that the KV cache rows cannot recover (recurrent
// and convolution states), taken after `pos` tokens. Restoring it rewinds the state to `pos`;
// KV rows [0, pos) must still hold the same tokens (rows past pos are overwritten later).
class StateCheckpoint {
 public:
  virtual ~StateCheckpoint() = default;
  int64_t pos = 0;
  uint64_t bytes = 0;  // memory the copy holds
};

// Per-sequence model state: KV caches, recurrent state, snapshot slots. Opaque to callers; it
// must not outlive the model that made it.
class ModelState {
 public:
  virtual ~ModelState() = default;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t max_chunk() const = 0;
  virtual int64_t max_snapshots() const = 0;
  virtual uint64_t cache_bytes() const = 0;   // KV cache / recurrent state / snapshot slots
  // True when the KV cache is all the state (pure attention): forward() may then restart at
  // any position p with KV rows [0, p) intact. False when recurrent state must be restored
  // (a checkpoint, accept(), or a restart at position 0) before running from an earlier position.
  virtual bool rewindable() const = 0;
  // Position the state has consumed up to (a rewindable state: where the last forward ended).
  virtual int64_t position() const = 0;
  // Copies the state as it is after `pos` tokens (pos: where the last forward ended), into a
  // preallocated buffer of the pool when one is free.
  virtual std::unique_ptr<StateCheckpoint> capture(int64_t pos) = 0;
  // Makes the state what it was when `c` was captured from this state.
  virtual void restore(const StateCheckpoint& c) = 0;
  // After a forward with ForwardOptions::snapshots whose rows for this state started at
  // position p0: makes the state the one after its first n_rows rows (position p0 + n_rows;
  // 1 <= n_rows <= rows of that forward). Selects the snapshot slot on the device: no replay,
  // no host round trip, no allocation. KV rows past the accepted position are stale and get
  // overwritten by the next forward. Throws df::Error without such a forward.
  virtual void accept(int64_t n_rows) = 0;
  // Pure-attention states: the state at position `pos` <= position() (the KV cache truncates
  // to any position). Recurrent states throw df::Error (use a checkpoint or accept()).
  virtual void truncate(int64_t pos) = 0;
};

class MtpHead;

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  // A new state; also grows the model's workspace to opt.max_chunk rows.
  virtual std::unique_ptr<ModelState> new_state(const StateOptions& opt) = 0;
  // Runs the batch's rows over the given states (batch.seq indexes `states`). A sequence whose
  // first row is at position 0 starts anew (recurrent state reset); otherwise a recurrent
  // state must be at that position (df::Error if not). Inputs are uploaded once; nothing is
  // downloaded. The batch has at most the workspace's rows (the largest max_chunk of the
  // states made so far). Throws df::Error for bad ids, positions or sequence layout.
  virtual ForwardOutputs forward(std::span<ModelState* const> states, const Batch& batch,
                                 const ForwardOptions& opt = {}) = 0;
  ForwardOutputs forward(ModelState& state, const Batch& batch, const ForwardOptions& opt = {}) {
    ModelState* s[1] = {&state};
    return forward(std::span<ModelState* const>(s, 1), batch, opt);
  }
  // Bytes of the model's activation workspace.
  virtual uint64_t scratch_bytes() const = 0;
  // The multi-token-prediction head (qwen35 files with nextn layers), or null.
  virtual MtpHead* mtp() { return nullptr; }
  // A hint before a forward whose rows will be the tokens ids [n, 1] (i32, on the backend; n
  // at most the workspace's rows): a model with routed experts hands the backend, for every
  // MoE block, the routing forecast from the tokens alone (Backend::moe_forecast with
  // MoeForecast::draft: each block's router over its norm of the token's embedding), so that
  // a backend bringing experts in from slow memory can start before the forward. Speculative
  // decoding calls it with a verify's rows once the drafts are known. Changes no result (it
  // may overwrite the workspace's scratch). Default: nothing.
  virtual void forecast_experts(const Tensor& ids) {}
  Backend& backend() const { return *backend_; }

 protected:
  explicit Model(Backend& b) : backend_(&b) {}

 private:
  Backend* backend_;
};

// The MTP (next-n prediction) head, as llama.cpp's qwen35 graph_mtp: for row p (token x_p),
//   h = eh_proj([enorm(embed(x_p)) ; hnorm(hidden_prev[p])]), one gated-attention block with
//   the head's own KV cache, shared_head_norm, then the trunk's output head (or the head's
//   shared_head_head) -> logits for the token after x_p's successor.
// hidden_prev row i is the trunk's final hidden state at the position before batch row i.
class MtpHead {
 public:
  virtual ~MtpHead() = default;
  // The head's own state (its KV cache); opt.max_snapshots is ignored.
  virtual std::unique_ptr<ModelState> new_state(const StateOptions& opt) = 0;
  // One sequence: batch.seq must be all 0. hidden_prev [n, n_embd] f32 (a device tensor).
  virtual ForwardOutputs forward(ModelState& state, const Batch& batch, const Tensor& hidden_prev,
                                 const ForwardOptions& opt = {}) = 0;
  // The drafting vocabulary: from now on the head's logits are those of token ids [0, n) only
  // ([rows, n]; the output projection's first n rows, a copy of their own where the backend
  // packs weights), so a draft step reads n / n_vocab of the projection. Byte-level BPE
  // vocabularies (Qwen's) number their tokens in merge order, roughly by falling frequency, so a
  // prefix keeps the common tokens; a token past it is never drafted (the verify still emits it:
  // the output stays the trunk's). n <= 0 or >= n_vocab: the whole vocabulary. Once per head
  // (df::Error for a second, different n). Not inside a graph capture.
  // context_slots > 0 (with n < n_vocab): the logits also have that many columns for tokens with
  // ids >= n met in the head's input (prompts and generated tokens: code repeats its names),
  // first met first kept, the oldest replaced when every slot is taken (models/draft_vocab.h).
  // draft_id maps a column to its token id, draft_ids on the device (argmax_ids).
  virtual void set_draft_vocab(int64_t n, int64_t context_slots = 0) = 0;
  virtual int64_t draft_vocab() const = 0;         // the prefix n (n_vocab unless trimmed)
  virtual int64_t draft_slots() const = 0;         // the context slots (0: none)
  virtual int64_t draft_columns_used() const = 0;  // the logits' columns that hold a token now
  virtual int32_t draft_id(int64_t column) const = 0;
  virtual const Tensor& draft_ids() const = 0;     // [columns, 1] i32; empty without slots (column = id)
};

// Reads general.architecture and builds the model on the backend (throws df::Error for an
// unsupported architecture, a missing tensor or key, or a shape that does not match).
// mtp_head (optional): a GGUF file whose MTP block becomes the model's head, replacing the
// file's own (qwen35, qwen35moe; it must outlive the model).
std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend, const gguf::File* mtp_head = nullptr);

}  // namespace df
