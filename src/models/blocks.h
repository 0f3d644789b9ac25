// Shared building blocks of the model recipes (qwen3.cpp, qwen35.cpp): hyperparameter
// reading, the weights of an attention / gated-attention / SwiGLU / output-head block with
// their loaders, the batch preamble (validation, per-sequence segments, one upload of the
// per-token inputs), the activation workspace, and the blocks' forward code over backend ops.
// Each architecture file then reads as its recipe, as llama.cpp's src/models/*.cpp do.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/model.h"
#include "models/weights.h"

namespace df::gguf {
class File;
}

namespace df::blocks {

// ---- hyperparameters ----

// GGUF keys under one architecture prefix ("qwen3.", "qwen35.").
class KeyReader {
 public:
  KeyReader(const gguf::File& f, std::string arch) : f_(f), prefix_(std::move(arch) + ".") {}
  int64_t u(const std::string& key) const;                 // required unsigned integer
  int64_t u_or(const std::string& key, int64_t d) const;   // optional
  float f_or(const std::string& key, double d) const;      // optional float
  std::vector<int64_t> ints(const std::string& key) const; // integer array; empty when absent
  const gguf::File& file() const { return f_; }

 private:
  const gguf::File& f_;
  std::string prefix_;
};

// The fields every Qwen3-family file shares: name, embedding and MLP sizes, head counts and
// size, rotary dims and base, context, norm epsilon (checked). n_layer is left to the caller
// (qwen35 stores MTP layers in block_count).
void read_common_hparams(const KeyReader& k, ModelInfo& m);
// n_vocab from token_embd.weight.
void read_vocab(const gguf::File& f, ModelInfo& m);

// ---- weights ----

struct AttnWeights {
  bool gated = false;   // qwen35: attn_q holds per head [query (hd) | gate (hd)]
  Tensor wq;            // [n_head * hd * (gated ? 2 : 1), dim]
  Tensor wk;            // [n_head_kv * hd, dim]
  Tensor wv;            // [n_head_kv * hd, dim]
  Tensor q_norm;        // [hd] f32
  Tensor k_norm;        // [hd] f32
  Tensor wo;            // [dim, n_head * hd]
};
AttnWeights load_attention(WeightLoader& w, const std::string& prefix, const ModelInfo& m, bool gated);

struct FfnWeights {
  Tensor gate;          // [n_ff, dim]
  Tensor up;            // [n_ff, dim]
  Tensor down;          // [dim, n_ff]
};
FfnWeights load_ffn(WeightLoader& w, const std::string& prefix, const ModelInfo& m);

struct OutputHead {
  Tensor norm;          // [dim] f32 (output_norm)
  Tensor out;           // [n_vocab, dim] (output.weight, or token_embd when tied)
  const void* out_host = nullptr;  // the file's bytes of `out` (Backend::weight_rows)
};
// Also sets m.tied_output.
OutputHead load_output_head(WeightLoader& w, const Tensor& tok_embd, ModelInfo& m);
// Weight bytes one decode step reads: every weight once, one row of the embedding table
// (sets m.weight_bytes, m.bytes_per_token from the loader's count).
void set_weight_bytes(const WeightLoader& w, const Tensor& tok_embd, ModelInfo& m);

// ---- the batch preamble ----

// The rows of one sequence in a batch.
struct Segment {
  int32_t seq = 0;      // index into the states
  int64_t row0 = 0;     // first batch row
  int64_t n = 0;        // rows
  int64_t pos0 = 0;     // position of the first row
};

// The batch as the ops see it: device i32 inputs and the segments.
struct BatchInputs {
  int64_t n = 0;                  // rows
  Tensor ids;                     // [n, 1] i32 token ids
  Tensor pos;                     // [n, 1] i32 positions
  Tensor out_rows;                // [n_out, 1] i32 batch rows to output
  std::vector<int32_t> rows;      // the same on the host
  std::vector<Segment> segments;  // in batch order
  // Views of rows of a segment.
  static Tensor rows_of(const Tensor& t, const Segment& s) { return t.slice_rows(s.row0, s.n); }
  // Rows [r0, r0 + cnt) of a batch of one sequence as a batch of their own (ids, positions and
  // the segment; no output rows: the caller's output head reads the whole batch's).
  BatchInputs sub(int64_t r0, int64_t cnt) const;
};

// The activation workspace of a model, shared by its states (one forward at a time): named
// tensors of `rows` rows, regrown when a state with a larger max_chunk is made. Output rows
// (hidden, logits) grow on demand to the largest number of output rows asked so far.
class Workspace {
 public:
  explicit Workspace(Backend& b) : b_(b) {}
  int64_t rows() const { return rows_; }
  uint64_t bytes() const { return bytes_; }
  // Changes whenever a tensor of the workspace is reallocated (recorded graphs then go stale).
  uint64_t generation() const { return generation_; }
  // Sizes every tensor for `rows` rows (allocates only when growing); `make` receives a
  // function that allocates [rows, cols] f32 tensors and builds the model's scratch.
  bool grow(int64_t rows);
  Tensor make(int64_t cols, GgmlType t = GgmlType::F32);  // [rows(), cols], during a rebuild
  // Uploads the batch's ids, positions and output rows in one upload (after validation).
  BatchInputs upload(const Batch& batch, std::span<ModelState* const> states, int64_t n_vocab,
                     const ForwardOptions& opt);
  // [n_out, cols] output tensors (grown on demand).
  Tensor hidden(int64_t n_out, int64_t dim);
  Tensor logits(int64_t n_out, int64_t n_vocab);

 private:
  Backend& b_;
  int64_t rows_ = 0;
  uint64_t bytes_ = 0;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor inputs_;                    // [3 * rows, 1] i32: ids | positions | output rows
  std::vector<int32_t> staging_;     // host copy of inputs_
  Tensor hidden_, logits_;
  std::vector<std::shared_ptr<Buffer>> out_buffers_;
  uint64_t generation_ = 0;
};

// Decode steps as device graphs (Backend::record / replay). A forward whose shape repeats
// (one sequence of at most 8 rows, the same output rows and options, an unchanged
// workspace) runs eagerly the first time (allocations happen there), is recorded the second
// time and replayed after that; the per-token inputs (ids, positions, output rows) are in
// device tensors that Workspace::upload refreshes before each replay. Owned by a state (its
// caches are in the recorded graph). Backends without graphs run every forward eagerly.
// `extra_key`: what else the recorded ops bake in (e.g. the address of an input tensor that
// is not in the workspace: the MTP head's hidden_prev).
class StepGraphs {
 public:
  ForwardOutputs run(Backend& b, const Workspace& ws, const BatchInputs& in, const ForwardOptions& opt,
                     const std::function<ForwardOutputs()>& ops, std::span<const int64_t> extra_key = {});

 private:
  struct Entry {
    std::vector<int64_t> key;
    bool recordable = true;          // false: the backend has no graphs
    std::unique_ptr<OpGraph> graph;  // null until the shape's second forward
    ForwardOutputs out;              // what the recorded forward returns
  };
  std::vector<Entry> entries_;
};

// ---- blocks over backend ops ----

// Per-head shape of attention, and the ops' parameters derived from it.
struct AttnShape {
  AttentionParams attn;   // heads, head size, scale 1/sqrt(hd)
  RopeParams rope;        // NeoX over n_rot dims (+ IMROPE sections)
  float eps = 1e-6f;      // q/k norm epsilon
  float eps_block = 1e-6f;  // the block's input norm epsilon (the model's rms_eps)
};
AttnShape attn_shape(const ModelInfo& m, const int32_t sections[4]);

// Scratch of an attention block, [rows] each.
struct AttnScratch {
  Tensor qg;              // [B, n_head * 2 * hd] gated blocks only: query + gate per head
  Tensor q, gate, att;    // [B, n_head * hd] (gate: gated blocks only)
  Tensor k, v;            // [B, n_head_kv * hd]
};
AttnScratch make_attn_scratch(Workspace& ws, const ModelInfo& m, bool gated);

// Attention mixer over the batch: xn [n, dim] (normed input) -> xn [n, dim] (mixer output).
// Projections, norms and RoPE run over all rows; kv_store / attention per segment with that
// sequence's cache caches[i] (parallel to in.segments).
void attention(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
               std::span<KvCache* const> caches, const Tensor& xn);

// The same with its norm and residual: x [n, dim] += mixer(rms_norm(x) * norm) (norm with
// epsilon s.eps_block; xn [n, dim] scratch), through the fused backend ops: the same ops in
// the same order as rms_norm + attention + add.
void attention_residual(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
                        std::span<KvCache* const> caches, const Tensor& x, const Tensor& norm, const Tensor& xn);

// The KV-cache part of attention_residual for rows whose mixer output nobody reads (the MTP
// head's rows before its output row: one layer, so only their K and V are ever used):
// xn = rms_norm(x) * norm, k and v projections, k's per-head norm, RoPE, kv_store. One
// sequence (cache); x, xn [n, dim]. The same ops as attention_residual takes for these rows
// (a row's K and V do not depend on the other rows' queries).
void attention_kv_rows(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
                       KvCache& cache, const Tensor& x, const Tensor& norm, const Tensor& xn);

// SwiGLU MLP: out [n, dim] = down(silu(gate . x) * (up . x)); gate/up scratch [n, n_ff].
void swiglu_ffn(Backend& b, const FfnWeights& W, const Tensor& x, const Tensor& gate, const Tensor& up,
                const Tensor& out);
// The same with its norm and residual: x += down(silu(gate . xn) * (up . xn)), xn =
// rms_norm(x) * norm (xn scratch), through the fused backend ops (the same ops in the same
// order as rms_norm + swiglu_ffn + add).
void swiglu_ffn_residual(Backend& b, const FfnWeights& W, const Tensor& x, const Tensor& norm, float eps,
                         const Tensor& xn, const Tensor& gate, const Tensor& up);

// The output head over the chosen rows of the residual stream x [n, dim]: gathers them,
// output_norm -> hidden [n_out, dim], and (opt.logits) the logits [n_out, n_vocab].
ForwardOutputs output_head(Backend& b, const OutputHead& H, float eps, Workspace& ws, const BatchInputs& in,
                           const Tensor& x, int64_t n_vocab, const ForwardOptions& opt);

}  // namespace df::blocks
