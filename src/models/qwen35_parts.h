// Qwen3.5 hybrid model parts shared by the trunk recipes (qwen35.cpp, qwen35moe.cpp), their
// state (qwen35_state.cpp) and the MTP head (qwen35_mtp.cpp): hyperparameters, layer weights,
// the Gated DeltaNet mixer (qwen35_deltanet.cpp), the per-sequence state with its snapshot
// slots and checkpoint pool.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "models/blocks.h"
#include "models/model.h"
#include "models/moe_ffn.h"

namespace df::qwen35 {

struct Hparams {
  ModelInfo info;
  int64_t n_layer_all = 0;        // block_count: trunk + MTP layers
  std::vector<bool> recurrent;    // per trunk layer: Gated DeltaNet (true) or attention
  int64_t conv_dim = 0;           // 2 * Hk * S + Hv * S: channels of the convolution
  int32_t sections[4] = {0, 0, 0, 0};  // rope.dimension_sections (IMROPE); all 0: plain NeoX
  bool moe = false;               // qwen35moe: a MoE FFN in every layer (MTP layers too)
  MoeShape moe_shape;
};
// The keys of general.architecture "qwen35" or "qwen35moe" (which adds the expert keys).
Hparams read_hparams(const gguf::File& f);

// Gated DeltaNet mixer weights.
struct DeltaNetWeights {
  Tensor wqkv;          // [conv_dim, dim]: rows q (Hk*S), k (Hk*S), v (Hv*S)
  Tensor wgate;         // [Hv*S, dim]  (attn_gate: z)
  Tensor conv1d;        // [conv_dim, K] f32
  Tensor dt_bias;       // [Hv] f32
  Tensor ssm_a;         // [Hv] f32 (-exp(A_log))
  Tensor ssm_beta;      // [Hv, dim]
  Tensor ssm_alpha;     // [Hv, dim]
  Tensor ssm_norm;      // [S] f32
  Tensor ssm_out;       // [dim, Hv*S]
};

struct Layer {
  bool recurrent = false;
  Tensor attn_norm;            // [dim] f32
  Tensor post_norm;            // [dim] f32 (post_attention_norm: the MLP's input norm)
  DeltaNetWeights dn;          // recurrent layers
  blocks::AttnWeights attn;    // gated attention layers (and the MTP block)
  blocks::FfnWeights ffn;      // SwiGLU (qwen35)
  MoeFfn moe;                  // routed experts + shared expert (qwen35moe)
};
// Norms and MLP (MoE FFN for qwen35moe) of block `l` plus its mixer (DeltaNet when recurrent,
// else gated attention).
Layer load_layer(WeightLoader& w, const Hparams& hp, int64_t l, bool recurrent);
// An MTP block (llama.cpp load_block_mtp): a full-attention decoder block plus the nextn
// projections, checked for presence and shapes.
void check_mtp_layer(WeightLoader& w, const Hparams& hp, int64_t l);

// The recurrent and conv states of every DeltaNet layer (one set: the live state, a
// checkpoint, or the snapshot slots).
struct RecurrentSet {
  std::vector<Tensor> conv;    // per DeltaNet layer [slots * (K-1), conv_dim] f32: last inputs
  std::vector<Tensor> ssm;     // per DeltaNet layer [slots * Hv*S, S] f32: row (h, j) = S_h[., j]
  std::vector<std::shared_ptr<Buffer>> buffers;
  uint64_t bytes = 0;
  static RecurrentSet make(Backend& b, const Hparams& hp, int64_t slots);  // none when slots <= 0
};

class State final : public ModelState {
 public:
  State(Backend& b, const Hparams& hp, const StateOptions& opt);
  int64_t n_ctx() const override { return opt_.n_ctx; }
  int64_t max_chunk() const override { return opt_.max_chunk; }
  int64_t max_snapshots() const override { return opt_.max_snapshots; }
  uint64_t cache_bytes() const override { return cache_bytes_; }
  bool rewindable() const override { return live.conv.empty(); }
  int64_t position() const override { return pos; }
  std::unique_ptr<StateCheckpoint> capture(int64_t at) override;
  void restore(const StateCheckpoint& c) override;
  void accept(int64_t n_rows) override;
  void truncate(int64_t p) override;

  // Before a forward whose rows for this state start at pos0: a new sequence at 0 (state
  // reset), else the state must be at pos0.
  void begin(int64_t pos0);
  // After it: n rows ran, with or without snapshots.
  void end(int64_t pos0, int64_t n, bool snapshots);

  RecurrentSet live;               // the state after `pos` tokens
  RecurrentSet snap;               // max_snapshots slots: the state after row t of the last forward
  std::vector<KvCache> kv_cache;   // per attention layer: n_ctx positions of n_head_kv * hd
  int64_t pos = 0;                 // tokens the state has consumed; -1: invalid (a forward failed)
  blocks::StepGraphs graphs;       // recorded decode steps over this state
  bool use_graphs() const { return opt_.graphs; }

 private:
  Backend& backend_;
  const Hparams& hp_;
  StateOptions opt_;
  uint64_t cache_bytes_ = 0;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  Tensor zero_conv_, zero_ssm_;    // zeros shaped as one layer's conv / delta-rule state: a reset
                                   // is a device copy, no host data
  std::vector<std::shared_ptr<RecurrentSet>> pool_;  // preallocated checkpoint buffers
  int64_t last_pos0_ = 0, last_n_ = 0;
  bool last_snapshots_ = false;
};

// Activations of the Gated DeltaNet mixer, [B rows] each (the workspace's row count).
struct DeltaNetScratch {
  Tensor qkv, conv_out;      // [B, conv_dim] projection, convolved + SiLU
  Tensor z, o;               // [B, Hv*S] output gate, delta-rule output
  Tensor beta, g;            // [B, Hv] write strength, log decay
};
DeltaNetScratch make_delta_net_scratch(blocks::Workspace& ws, const Hparams& hp);
// Gated DeltaNet mixer: xn [n, dim] (normed input) -> xn [n, dim]. Projections and
// elementwise ops run over all rows; the convolution and the delta rule per sequence, on
// that sequence's state st[s] (DeltaNet layer i; its snapshot slots when asked).
void delta_net(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
               const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots,
               const Tensor& xn);
// The same with its norm and residual: x [n, dim] += mixer(rms_norm(x) * norm) (xn [n, dim]
// scratch), through the fused backend ops (the same ops, same order, as rms_norm +
// delta_net + add).
void delta_net_residual(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
                        const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots,
                        const Tensor& x, const Tensor& norm, const Tensor& xn);

}  // namespace df::qwen35
