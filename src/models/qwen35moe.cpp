// Qwen3.5 mixture of experts: llama.cpp arch "qwen35moe" (src/models/qwen35moe.cpp).
// The qwen35 trunk (qwen35.cpp: Gated DeltaNet and gated attention layers) with the MLP of
// every layer replaced by a MoE FFN (moe_ffn.h): a softmax router over the experts, the top
// expert_used_count experts per token with their weights renormalised to 1, each a SwiGLU of
// expert_feed_forward_length, plus a shared SwiGLU expert scaled by sigmoid(ffn_gate_inp_shexp . x):
//   x += mixer(rmsnorm(x, attn_norm));  x += MoE(rmsnorm(x, post_attention_norm))
// MTP layers (blk.N.nextn.*) are full-attention blocks with the same MoE FFN: the first is
// the head of qwen35_mtp.cpp (Model::mtp(), as llama.cpp's qwen35moe graph_mtp), any further
// ones are loaded and checked.
// References read: llama.cpp src/models/qwen35moe.cpp, llama-graph.cpp (build_moe_ffn).
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
  Tensor x, xn;                // [B, dim] residual stream; normed input / mixer output
  Tensor ffn_out;              // [B, dim] MoE FFN output
  qwen35::DeltaNetScratch dn;  // Gated DeltaNet: qkv, conv_out, z, o, beta, g
  blocks::AttnScratch attn;    // gated attention: qg, q, gate, k, v, att
  MoeScratch moe;              // router logits, ids, weights, expert activations, shared expert
};

class Qwen35Moe final : public Model {
 public:
  Qwen35Moe(const gguf::File& f, Backend& b, const gguf::File* head_file) : Model(b), hp_(qwen35::read_hparams(f)), ws_(b) {
    ModelInfo& m = hp_.info;
    if (!hp_.moe) throw Error("qwen35moe: the file's architecture is '" + m.arch + "'");
    shape_ = blocks::attn_shape(m, hp_.sections);
    WeightLoader w(f, b);
    tok_embd_ = w.get("token_embd.weight", m.n_embd, m.n_vocab);
    head_ = blocks::load_output_head(w, tok_embd_, m);
    for (int64_t l = 0; l < m.n_layer; ++l)
      layers_.push_back(qwen35::load_layer(w, hp_, l, hp_.recurrent[static_cast<size_t>(l)]));
    blocks::set_weight_bytes(w, tok_embd_, m);
    // A decode step reads, of each MoE FFN, the router, its chosen experts and the shared expert.
    for (const Layer& L : layers_) m.bytes_per_token -= moe_weight_bytes(L.moe) - moe_bytes_per_token(hp_.moe_shape, L.moe);
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
    const Tensor x = s_.x.slice_rows(0, n), xn = s_.xn.slice_rows(0, n), ffn = s_.ffn_out.slice_rows(0, n);
    std::vector<KvCache*> caches(st.size());

    b.get_rows(tok_embd_, in.ids, x);                           // x [n, dim]
    size_t i_rec = 0, i_att = 0;
    for (const Layer& L : layers_) {
      b.rms_norm(x, L.attn_norm, m.rms_eps, xn);                // xn [n, dim]
      if (L.recurrent) {
        qwen35::delta_net(b, hp_, L.dn, s_.dn, in, st, i_rec++, opt.snapshots, xn);  // xn <- mixer(xn)
      } else {
        for (size_t i = 0; i < st.size(); ++i) caches[i] = &st[i]->kv_cache[i_att];
        ++i_att;
        blocks::attention(b, L.attn, shape_, s_.attn, in, caches, xn);
      }
      b.add(x, xn);                                             // residual
      b.rms_norm(x, L.post_norm, m.rms_eps, xn);
      moe_ffn(b, hp_.moe_shape, L.moe, s_.moe, xn, ffn);        // ffn [n, dim]
      b.add(x, ffn);
    }
    for (size_t i = 0; i < st.size(); ++i) st[i]->end(in.segments[i].pos0, in.segments[i].n, opt.snapshots);
    return blocks::output_head(b, head_, m.rms_eps, ws_, in, x, m.n_vocab, opt);
  }

 private:
  void make_scratch() {
    const ModelInfo& m = hp_.info;
    s_ = Scratch{};
    s_.x = ws_.make(m.n_embd);
    s_.xn = ws_.make(m.n_embd);
    s_.ffn_out = ws_.make(m.n_embd);
    s_.dn = qwen35::make_delta_net_scratch(ws_, hp_);
    if (m.n_layer_recurrent < m.n_layer) s_.attn = blocks::make_attn_scratch(ws_, m, true);
    s_.moe = make_moe_scratch(hp_.moe_shape, [&](int64_t cols, GgmlType t) { return ws_.make(cols, t); });
  }

  Hparams hp_;
  blocks::AttnShape shape_;
  Tensor tok_embd_;            // [n_vocab, dim]
  blocks::OutputHead head_;    // output_norm, output (or token_embd when tied)
  std::vector<Layer> layers_;
  blocks::Workspace ws_;
  Scratch s_;
  std::unique_ptr<qwen35::Mtp> mtp_;  // the nextn head (null without nextn layers)
};

}  // namespace

std::unique_ptr<Model> make_qwen35moe(const gguf::File& f, Backend& b, const gguf::File* head_file) {
  return std::make_unique<Qwen35Moe>(f, b, head_file);
}

}  // namespace df
