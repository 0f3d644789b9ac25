// Qwen3 (dense): llama.cpp arch "qwen3".
// Per layer: RMSNorm -> Q/K/V -> per-head q/k RMSNorm -> NeoX RoPE -> GQA over the KV cache ->
// output projection -> residual -> RMSNorm -> SwiGLU MLP -> residual. Then the final norm and
// the output head (output.weight, or tied to token_embd.weight) over the chosen rows.
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/blocks.h"
#include "models/kv_state.h"
#include "models/model.h"
#include "models/qwen3.h"

namespace df {
namespace {

struct Layer {
  Tensor attn_norm;          // [dim] f32
  blocks::AttnWeights attn;  // q/k/v/o projections, q/k norms
  Tensor ffn_norm;           // [dim] f32
  blocks::FfnWeights ffn;    // SwiGLU
};

// The KV cache is the whole state: any position can be rewound to.
class Qwen3State final : public KvState {
 public:
  Qwen3State(Backend& b, const ModelInfo& hp, const StateOptions& opt) : KvState(opt) {
    const GgmlType kt = opt.kv_f32 ? GgmlType::F32 : GgmlType::F16;
    for (int64_t l = 0; l < hp.n_layer; ++l) {
      kv_cache.push_back(b.alloc_kv_cache(opt.n_ctx, hp.n_head_kv * hp.head_dim, kt));
      cache_bytes_ += kv_cache.back().nbytes();
    }
  }
  uint64_t cache_bytes() const override { return cache_bytes_; }

  std::vector<KvCache> kv_cache;  // per layer: n_ctx positions of n_head_kv * head_dim

 private:
  uint64_t cache_bytes_ = 0;
};

// Activations, [B rows] each (the workspace's row count).
struct Scratch {
  Tensor x, xn;              // [B, dim] residual stream, normed input / block output
  blocks::AttnScratch attn;  // q, k, v, att
  Tensor gate, up;           // [B, n_ff]
};

class Qwen3 final : public Model {
 public:
  Qwen3(const gguf::File& f, Backend& b) : Model(b), ws_(b) {
    blocks::KeyReader k(f, "qwen3");
    hp_.arch = "qwen3";
    hp_.n_layer = k.u("block_count");
    if (hp_.n_layer <= 0) throw Error("qwen3: block_count must be positive");
    blocks::read_common_hparams(k, hp_);
    blocks::read_vocab(f, hp_);
    shape_ = blocks::attn_shape(hp_, nullptr);

    WeightLoader w(f, b);
    tok_embd_ = w.get("token_embd.weight", hp_.n_embd, hp_.n_vocab);
    head_ = blocks::load_output_head(w, tok_embd_, hp_);
    for (int64_t l = 0; l < hp_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      Layer L;
      L.attn_norm = w.get_f32(p + "attn_norm.weight", hp_.n_embd);
      L.attn = blocks::load_attention(w, p, hp_, /*gated=*/false);
      L.ffn_norm = w.get_f32(p + "ffn_norm.weight", hp_.n_embd);
      L.ffn = blocks::load_ffn(w, p, hp_);
      layers_.push_back(L);
    }
    blocks::set_weight_bytes(w, tok_embd_, hp_);
    for (const auto& t : f.tensors()) hp_.n_params += static_cast<uint64_t>(t.n_elements());
  }

  const ModelInfo& info() const override { return hp_; }
  uint64_t scratch_bytes() const override { return ws_.bytes(); }

  std::unique_ptr<ModelState> new_state(const StateOptions& opt) override {
    if (opt.n_ctx <= 0 || opt.max_chunk <= 0 || opt.max_snapshots < 0)
      throw Error("context and chunk sizes must be positive");
    if (ws_.grow(opt.max_chunk)) {
      const int64_t dim = hp_.n_embd;
      s_.x = ws_.make(dim);
      s_.xn = ws_.make(dim);
      s_.attn = blocks::make_attn_scratch(ws_, hp_, false);
      s_.gate = ws_.make(hp_.n_ff);
      s_.up = ws_.make(hp_.n_ff);
    }
    return std::make_unique<Qwen3State>(backend(), hp_, opt);
  }

  ForwardOutputs forward(std::span<ModelState* const> states, const Batch& batch,
                         const ForwardOptions& opt) override {
    Backend& b = backend();
    b.set_row_exact(opt.row_exact);
    const blocks::BatchInputs in = ws_.upload(batch, states, hp_.n_vocab, opt);
    std::vector<Qwen3State*> st;
    for (const blocks::Segment& g : in.segments) st.push_back(static_cast<Qwen3State*>(states[static_cast<size_t>(g.seq)]));
    const int64_t n = in.n;
    const Tensor x = s_.x.slice_rows(0, n), xn = s_.xn.slice_rows(0, n);
    const Tensor gate = s_.gate.slice_rows(0, n), up = s_.up.slice_rows(0, n);
    std::vector<KvCache*> caches(st.size());
    auto ops = [&] {
      b.get_rows(tok_embd_, in.ids, x);                          // x [n, dim]
      for (size_t l = 0; l < layers_.size(); ++l) {
        const Layer& L = layers_[l];
        for (size_t i = 0; i < st.size(); ++i) caches[i] = &st[i]->kv_cache[l];
        // x += attention(rms_norm(x)); x += ffn(rms_norm(x))  (xn [n, dim] scratch)
        blocks::attention_residual(b, L.attn, shape_, s_.attn, in, caches, x, L.attn_norm, xn);
        blocks::swiglu_ffn_residual(b, L.ffn, x, L.ffn_norm, hp_.rms_eps, xn, gate, up);
      }
      return blocks::output_head(b, head_, hp_.rms_eps, ws_, in, x, hp_.n_vocab, opt);
    };
    // One sequence: a repeated decode shape replays as a recorded graph.
    const ForwardOutputs out = st.size() == 1 && st[0]->use_graphs() ? st[0]->graphs.run(b, ws_, in, opt, ops) : ops();
    for (size_t i = 0; i < st.size(); ++i) {
      st[i]->last_pos0 = in.segments[i].pos0;
      st[i]->last_n = in.segments[i].n;
      st[i]->pos = in.segments[i].pos0 + in.segments[i].n;
    }
    return out;
  }

 private:
  ModelInfo hp_;
  blocks::AttnShape shape_;
  Tensor tok_embd_;            // [n_vocab, dim]
  blocks::OutputHead head_;    // output_norm, output (or token_embd when tied)
  std::vector<Layer> layers_;
  blocks::Workspace ws_;
  Scratch s_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(const gguf::File& f, Backend& b) { return std::make_unique<Qwen3>(f, b); }

}  // namespace df
