// Qwen3.5 hybrid (dense): llama.cpp arch "qwen35".
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
// References read: llama.cpp src/models/qwen35.cpp, delta-net-base.cpp, conversion/qwen.py.
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/blocks.h"
#include "models/model.h"
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
  Tensor qkv, conv_out;      // [B, conv_dim] projection, convolved + SiLU
  Tensor z, o;               // [B, Hv*S] output gate, delta-rule output
  Tensor beta, g;            // [B, Hv] write strength, log decay
  blocks::AttnScratch attn;  // gated attention: qg, q, gate, k, v, att
  Tensor ffn_gate, ffn_up;   // [B, n_ff]
};

class Qwen35 final : public Model {
 public:
  Qwen35(const gguf::File& f, Backend& b) : Model(b), hp_(qwen35::read_hparams(f)), ws_(b) {
    ModelInfo& m = hp_.info;
    shape_ = blocks::attn_shape(m, hp_.sections);
    WeightLoader w(f, b);
    tok_embd_ = w.get("token_embd.weight", m.n_embd, m.n_vocab);
    head_ = blocks::load_output_head(w, tok_embd_, m);
    for (int64_t l = 0; l < m.n_layer; ++l)
      layers_.push_back(qwen35::load_layer(w, hp_, l, hp_.recurrent[static_cast<size_t>(l)]));
    blocks::set_weight_bytes(w, tok_embd_, m);
    // MTP layers: the first is the head (llama.cpp runs one); any further ones are checked.
    if (m.n_layer_nextn > 0) {
      mtp_ = std::make_unique<qwen35::Mtp>(f, b, hp_, tok_embd_, head_);
      m.weight_bytes += mtp_->weight_bytes();
    }
    WeightLoader extra(f, b);
    for (int64_t l = m.n_layer + 1; l < hp_.n_layer_all; ++l) check_mtp_layer(extra, l);
    m.weight_bytes += extra.bytes_loaded();
    for (const auto& t : f.tensors()) m.n_params += static_cast<uint64_t>(t.n_elements());
  }

  const ModelInfo& info() const override { return hp_.info; }
  uint64_t scratch_bytes() const override { return ws_.bytes(); }
  MtpHead* mtp() override { return mtp_.get(); }

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
    const blocks::BatchInputs in = ws_.upload(batch, states, m.n_vocab, opt);
    std::vector<State*> st;
    for (const blocks::Segment& g : in.segments) st.push_back(static_cast<State*>(states[static_cast<size_t>(g.seq)]));
    for (size_t i = 0; i < st.size(); ++i) st[i]->begin(in.segments[i].pos0);
    const int64_t n = in.n;
    const Tensor x = s_.x.slice_rows(0, n), xn = s_.xn.slice_rows(0, n);
    std::vector<KvCache*> caches(st.size());

    b.get_rows(tok_embd_, in.ids, x);                           // x [n, dim]
    size_t i_rec = 0, i_att = 0;
    for (const Layer& L : layers_) {
      b.rms_norm(x, L.attn_norm, m.rms_eps, xn);                // xn [n, dim]
      if (L.recurrent) {
        delta_net(L, in, st, i_rec++, opt.snapshots, xn);       // xn <- mixer(xn)
      } else {
        for (size_t i = 0; i < st.size(); ++i) caches[i] = &st[i]->kv_cache[i_att];
        ++i_att;
        blocks::attention(b, L.attn, shape_, s_.attn, in, caches, xn);
      }
      b.add(x, xn);                                             // residual
      b.rms_norm(x, L.post_norm, m.rms_eps, xn);
      blocks::swiglu_ffn(b, L.ffn, xn, s_.ffn_gate.slice_rows(0, n), s_.ffn_up.slice_rows(0, n), xn);
      b.add(x, xn);
    }
    for (size_t i = 0; i < st.size(); ++i) st[i]->end(in.segments[i].pos0, in.segments[i].n, opt.snapshots);
    return blocks::output_head(b, head_, m.rms_eps, ws_, in, x, m.n_vocab, opt);
  }

 private:
  void make_scratch() {
    const ModelInfo& m = hp_.info;
    const int64_t S = m.ssm_state, Hv = m.ssm_v_heads;
    s_ = Scratch{};
    s_.x = ws_.make(m.n_embd);
    s_.xn = ws_.make(m.n_embd);
    if (m.n_layer_recurrent > 0) {
      s_.qkv = ws_.make(hp_.conv_dim);
      s_.conv_out = ws_.make(hp_.conv_dim);
      s_.z = ws_.make(Hv * S);
      s_.o = ws_.make(Hv * S);
      s_.beta = ws_.make(Hv);
      s_.g = ws_.make(Hv);
    }
    if (m.n_layer_recurrent < m.n_layer) s_.attn = blocks::make_attn_scratch(ws_, m, true);
    s_.ffn_gate = ws_.make(m.n_ff);
    s_.ffn_up = ws_.make(m.n_ff);
  }

  // Gated DeltaNet mixer: xn [n, dim] (normed input) -> xn [n, dim]. Projections and
  // elementwise ops run over all rows; the convolution and the delta rule per sequence, on
  // that sequence's state i (and its snapshot slots when asked).
  void delta_net(const Layer& L, const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i,
                 bool snapshots, const Tensor& xn) {
    const ModelInfo& m = hp_.info;
    const qwen35::DeltaNetWeights& W = L.dn;
    Backend& b = backend();
    const int64_t n = in.n, S = m.ssm_state, kd = m.ssm_k_heads * S, vd = m.ssm_v_heads * S;
    const Tensor qkv = s_.qkv.slice_rows(0, n), conv = s_.conv_out.slice_rows(0, n);
    const Tensor z = s_.z.slice_rows(0, n), o = s_.o.slice_rows(0, n);
    const Tensor beta = s_.beta.slice_rows(0, n), g = s_.g.slice_rows(0, n);
    b.matmul(W.wqkv, xn, qkv);                                  // qkv [n, conv_dim]
    b.matmul(W.wgate, xn, z);                                   // z [n, Hv*S]
    b.matmul(W.ssm_beta, xn, beta);                             // beta [n, Hv]
    b.unary(UnaryOp::SIGMOID, beta, beta);
    b.matmul(W.ssm_alpha, xn, g);                               // g [n, Hv]
    b.softplus_scale(g, W.dt_bias, W.ssm_a, g);                 // log decay (<= 0)
    for (size_t s = 0; s < st.size(); ++s) {                    // conv [n, conv_dim], per sequence
      const blocks::Segment& seg = in.segments[s];
      b.ssm_conv(blocks::BatchInputs::rows_of(qkv, seg), st[s]->live.conv[i], W.conv1d,
                 blocks::BatchInputs::rows_of(conv, seg), snapshots ? st[s]->snap.conv[i] : Tensor{});
    }
    b.unary(UnaryOp::SILU, conv, conv);
    const Tensor q = conv.slice_cols(0, kd);                    // q [n, Hk*S]
    const Tensor k = conv.slice_cols(kd, kd);                   // k [n, Hk*S]
    const Tensor v = conv.slice_cols(2 * kd, vd);               // v [n, Hv*S]
    b.l2_norm(q, S, m.rms_eps, q);
    b.l2_norm(k, S, m.rms_eps, k);
    const float scale = 1.0f / std::sqrt(static_cast<float>(S));
    for (size_t s = 0; s < st.size(); ++s) {                    // o [n, Hv*S], per sequence
      const blocks::Segment& seg = in.segments[s];
      auto rows = [&](const Tensor& t) { return blocks::BatchInputs::rows_of(t, seg); };
      b.gated_delta_rule(rows(q), rows(k), rows(v), rows(g), rows(beta), st[s]->live.ssm[i], scale, rows(o),
                         snapshots ? st[s]->snap.ssm[i] : Tensor{});
    }
    b.rms_norm(o.reshape(S), W.ssm_norm, m.rms_eps, o.reshape(S));  // per value head
    b.swiglu(z, o, o);                                          // o = silu(z) * o
    b.matmul(W.ssm_out, o, xn);                                 // xn [n, dim]
  }

  // A further MTP block (past the first, which is the head): a full-attention decoder block
  // plus the nextn projections (llama.cpp load_block_mtp), checked for presence and shapes.
  void check_mtp_layer(WeightLoader& w, int64_t l) const {
    const ModelInfo& m = hp_.info;
    const std::string p = "blk." + std::to_string(l) + ".";
    qwen35::load_layer(w, hp_, l, false);
    w.get(p + "nextn.eh_proj.weight", 2 * m.n_embd, m.n_embd);  // [dim, 2 * dim]
    w.get_f32(p + "nextn.enorm.weight", m.n_embd);
    w.get_f32(p + "nextn.hnorm.weight", m.n_embd);
    if (w.has(p + "nextn.embed_tokens.weight")) w.get(p + "nextn.embed_tokens.weight", m.n_embd, m.n_vocab);
    if (w.has(p + "nextn.shared_head_head.weight")) w.get(p + "nextn.shared_head_head.weight", m.n_embd, m.n_vocab);
    if (w.has(p + "nextn.shared_head_norm.weight")) w.get_f32(p + "nextn.shared_head_norm.weight", m.n_embd);
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

std::unique_ptr<Model> make_qwen35(const gguf::File& f, Backend& b) { return std::make_unique<Qwen35>(f, b); }

}  // namespace df
