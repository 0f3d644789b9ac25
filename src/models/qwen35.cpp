// Qwen3.5 hybrid: llama.cpp archs "qwen35" (dense MLP) and "qwen35moe" (a MoE FFN), one trunk.
// Trunk layer l is gated full attention when (l + 1) % full_attention_interval == 0, and Gated
// DeltaNet linear attention otherwise. Every layer:
//   x += mixer(rmsnorm(x, attn_norm));  x += SwiGLU-MLP(rmsnorm(x, post_attention_norm))
// Gated DeltaNet mixer (per token t; Hk key heads, Hv value heads, head size S):
//   [q | k | v] = attn_qkv . x -> causal depthwise conv (ssm_conv1d, kernel K, state = the last
//   K-1 inputs) -> SiLU; q, k L2-normalised per head; beta = sigmoid(ssm_beta . x);
//   g = softplus(ssm_alpha . x + ssm_dt.bias) * ssm_a  (ssm_a = -exp(A_log), stored so);
//   delta rule on a [S x S] state per value head (value head h reads key head h % Hk: GGUF
//   files store the value heads in tiled order); o = rmsnorm(o per head, ssm_norm) *
//   SiLU(attn_gate . x); out = ssm_out . o
// Gated attention mixer: attn_q gives per head [query (hd) | gate (hd)]; q/k RMSNorm per head;
//   RoPE (IMROPE sections) on the first rope.dimension_count dims; GQA over the KV cache;
//   out = attn_output . (attention * sigmoid(gate))
// MTP layers (blk.N.nextn.*, N >= block_count - nextn_predict_layers): the head of
// qwen35_mtp.cpp (Model::mtp()).
// qwen35moe (llama.cpp src/models/qwen35moe.cpp) replaces every layer's MLP by a MoE FFN
// (moe_ffn.h): a softmax router over the experts, the top expert_used_count experts per token
// with their weights renormalised to 1, each a SwiGLU of expert_feed_forward_length, plus a
// shared SwiGLU expert scaled by sigmoid(ffn_gate_inp_shexp . x); its MTP layers carry the
// same MoE FFN. A decode step of either records into a graph (a device backend's matmul_id of
// up to 8 rows reads the routed ids on the device).
// The DeltaNet mixer lives in qwen35_deltanet.cpp.
// References read: llama.cpp src/models/qwen35.cpp, qwen35moe.cpp, llama-graph.cpp
// (build_moe_ffn), delta-net-base.cpp, conversion/qwen.py.
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/blocks.h"
#include "models/model.h"
#include "models/moe_ffn.h"
#include "models/qwen35.h"
#include "models/qwen35_mtp.h"
#include "models/qwen35_parts.h"

namespace df {
namespace {

using qwen35::Hparams;
using qwen35::Layer;
using qwen35::State;

// Activations, [B rows] each (the workspace's row count).
struct Scratch {
  Tensor x, xn;              // [B, dim] residual stream; normed input / mixer output
  qwen35::DeltaNetScratch dn;  // Gated DeltaNet: qkv, conv_out, z, o, beta, g
  blocks::AttnScratch attn;  // gated attention: qg, q, gate, k, v, att
  Tensor ffn_gate, ffn_up;   // [B, n_ff] dense MLP
  Tensor ffn_out;            // [B, dim] MoE FFN output
  MoeScratch moe;            // router logits, ids, weights, expert activations, shared expert
};

class Qwen35 final : public Model {
 public:
  Qwen35(const gguf::File& f, Backend& b, bool moe, const gguf::File* head_file)
      : Model(b), hp_(qwen35::read_hparams(f)), ws_(b) {
    ModelInfo& m = hp_.info;
    if (hp_.moe != moe)
      throw Error(moe ? "qwen35moe: the file's architecture is '" + m.arch + "'"
                      : std::string("qwen35: a qwen35moe file (load it with make_qwen35moe)"));
    shape_ = blocks::attn_shape(m, hp_.sections);
    WeightLoader w(f, b);
    tok_embd_ = w.get("token_embd.weight", m.n_embd, m.n_vocab);
    head_ = blocks::load_output_head(w, tok_embd_, m);
    for (int64_t l = 0; l < m.n_layer; ++l)
      layers_.push_back(qwen35::load_layer(w, hp_, l, hp_.recurrent[static_cast<size_t>(l)]));
    blocks::set_weight_bytes(w, tok_embd_, m);
    // A decode step reads, of each MoE FFN, the router, its chosen experts and the shared expert.
    if (moe)
      for (const Layer& L : layers_)
        m.bytes_per_token -= moe_weight_bytes(L.moe) - moe_bytes_per_token(hp_.moe_shape, L.moe);
    // MTP layers: the first is the head (llama.cpp runs one); any further ones are checked.
    // A head file (--mtp-head) replaces the file's own head.
    if (head_file)
      mtp_ = qwen35::mtp_from_file(f, *head_file, b, hp_, tok_embd_, head_);
    else if (m.n_layer_nextn > 0)
      mtp_ = std::make_unique<qwen35::Mtp>(f, b, hp_, tok_embd_, head_);
    if (mtp_) m.weight_bytes += mtp_->weight_bytes();
    WeightLoader extra(f, b);
    for (int64_t l = m.n_layer + 1; l < hp_.n_layer_all; ++l) qwen35::check_mtp_layer(extra, hp_, l);
    m.weight_bytes += extra.bytes_loaded();
    for (const auto& t : f.tensors()) m.n_params += static_cast<uint64_t>(t.n_elements());
  }

  const ModelInfo& info() const override { return hp_.info; }
  uint64_t scratch_bytes() const override { return ws_.bytes(); }
  MtpHead* mtp() override { return mtp_.get(); }

  void forecast_experts(const Tensor& ids) override {
    Backend& b = backend();
    if (!hp_.moe || ids.rows == 0 || !b.wants_moe_forecast(true)) return;
    if (ids.rows > ws_.rows()) throw Error("forecast_experts: more rows than the workspace holds");
    // x [n, dim] = the tokens' embeddings: the residual stream of layer 0 before its mixer, and
    // the part of every later layer's that the token alone sets
    const Tensor x = s_.x.slice_rows(0, ids.rows), xn = s_.xn.slice_rows(0, ids.rows);
    b.get_rows(tok_embd_, ids, x);
    const ModelInfo& m = hp_.info;
    int64_t block = 0;
    for (const Layer& L : layers_)
      moe_ffn_forecast(b, hp_.moe_shape, L.moe, s_.moe, x, L.post_norm, m.rms_eps, xn, true, block++);
  }

  std::unique_ptr<ModelState> new_state(const StateOptions& opt) override {
    if (opt.n_ctx <= 0 || opt.max_chunk <= 0 || opt.max_snapshots < 0 || opt.max_checkpoints < 0)
      throw Error("context and chunk sizes must be positive");
    if (ws_.grow(opt.max_chunk)) make_scratch();
    return std::make_unique<State>(backend(), hp_, opt);
  }

  ForwardOutputs forward(std::span<ModelState* const> states, const Batch& batch,
                         const ForwardOptions& opt) override {
    const ModelInfo& m = hp_.info;
    Backend& b = backend();
    b.set_row_exact(opt.row_exact);
    const blocks::BatchInputs in = ws_.upload(batch, states, m.n_vocab, opt);
    std::vector<State*> st;
    for (const blocks::Segment& g : in.segments) st.push_back(static_cast<State*>(states[static_cast<size_t>(g.seq)]));
    for (size_t i = 0; i < st.size(); ++i) st[i]->begin(in.segments[i].pos0);
    const int64_t n = in.n;
    const Tensor x = s_.x.slice_rows(0, n), xn = s_.xn.slice_rows(0, n);
    const Tensor ffn = hp_.moe ? s_.ffn_out.slice_rows(0, n) : xn;
    std::vector<KvCache*> caches(st.size());
    auto ops = [&] {
      b.get_rows(tok_embd_, in.ids, x);                         // x [n, dim]
      size_t i_rec = 0, i_att = 0;
      for (const Layer& L : layers_) {
        // x += mixer(rms_norm(x)); x += ffn(rms_norm(x))  (xn [n, dim] scratch)
        if (hp_.moe) moe_ffn_forecast(b, hp_.moe_shape, L.moe, s_.moe, x, L.post_norm, m.rms_eps, xn);
        if (L.recurrent) {
          qwen35::delta_net_residual(b, hp_, L.dn, s_.dn, in, st, i_rec++, opt.snapshots, x, L.attn_norm, xn);
        } else {
          for (size_t i = 0; i < st.size(); ++i) caches[i] = &st[i]->kv_cache[i_att];
          ++i_att;
          blocks::attention_residual(b, L.attn, shape_, s_.attn, in, caches, x, L.attn_norm, xn);
        }
        if (hp_.moe) {
          moe_ffn_residual(b, hp_.moe_shape, L.moe, s_.moe, x, L.post_norm, m.rms_eps, xn, ffn);
        } else {
          blocks::swiglu_ffn_residual(b, L.ffn, x, L.post_norm, m.rms_eps, xn, s_.ffn_gate.slice_rows(0, n),
                                      s_.ffn_up.slice_rows(0, n));
        }
      }
      return blocks::output_head(b, head_, m.rms_eps, ws_, in, x, m.n_vocab, opt);
    };
    // One sequence: a repeated decode shape replays as a recorded graph.
    const bool graphs = st.size() == 1 && st[0]->use_graphs();
    const ForwardOutputs out = graphs ? st[0]->graphs.run(b, ws_, in, opt, ops) : ops();
    for (size_t i = 0; i < st.size(); ++i) st[i]->end(in.segments[i].pos0, in.segments[i].n, opt.snapshots);
    return out;
  }

 private:
  void make_scratch() {
    const ModelInfo& m = hp_.info;
    s_ = Scratch{};
    s_.x = ws_.make(m.n_embd);
    s_.xn = ws_.make(m.n_embd);
    s_.dn = qwen35::make_delta_net_scratch(ws_, hp_);
    if (m.n_layer_recurrent < m.n_layer) s_.attn = blocks::make_attn_scratch(ws_, m, true);
    if (hp_.moe) {
      s_.ffn_out = ws_.make(m.n_embd);
      s_.moe = make_moe_scratch(hp_.moe_shape, [&](int64_t cols, GgmlType t) { return ws_.make(cols, t); });
    } else {
      s_.ffn_gate = ws_.make(m.n_ff);
      s_.ffn_up = ws_.make(m.n_ff);
    }
  }

  Hparams hp_;
  blocks::AttnShape shape_;
  Tensor tok_embd_;            // [n_vocab, dim]
  blocks::OutputHead head_;    // output_norm, output (or token_embd when tied)
  std::vector<Layer> layers_;
  std::unique_ptr<qwen35::Mtp> mtp_;  // the nextn head (null without nextn layers)
  blocks::Workspace ws_;
  Scratch s_;
};

}  // namespace

std::unique_ptr<Model> make_qwen35(const gguf::File& f, Backend& b, const gguf::File* head_file) {
  return std::make_unique<Qwen35>(f, b, false, head_file);
}
std::unique_ptr<Model> make_qwen35moe(const gguf::File& f, Backend& b, const gguf::File* head_file) {
  return std::make_unique<Qwen35>(f, b, true, head_file);
}

}  // namespace df
