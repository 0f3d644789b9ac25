// Qwen3 (dense): llama.cpp arch "qwen3".
// Per layer: RMSNorm -> Q/K/V -> per-head q/k RMSNorm -> NeoX RoPE -> GQA over the KV cache ->
// output projection -> residual -> RMSNorm -> SwiGLU MLP -> residual. Then the final norm and
// the output head (output.weight, or tied to token_embd.weight).
#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "models/qwen3.h"
#include "models/weights.h"

namespace df {
namespace {

struct Layer {
  Tensor attn_norm;    // [dim] f32
  Tensor wq;           // [n_head * head_dim, dim]   (rows, cols)
  Tensor wk;           // [n_head_kv * head_dim, dim]
  Tensor wv;           // [n_head_kv * head_dim, dim]
  Tensor q_norm;       // [head_dim] f32
  Tensor k_norm;       // [head_dim] f32
  Tensor wo;           // [dim, n_head * head_dim]
  Tensor ffn_norm;     // [dim] f32
  Tensor ffn_gate;     // [n_ff, dim]
  Tensor ffn_up;       // [n_ff, dim]
  Tensor ffn_down;     // [dim, n_ff]
};

class Qwen3State final : public ModelState {
 public:
  Qwen3State(Backend& b, const ModelInfo& hp, const StateOptions& opt) : backend_(b), opt_(opt) {
    const int64_t kv = hp.n_head_kv * hp.head_dim;
    const GgmlType kt = opt.kv_f32 ? GgmlType::F32 : GgmlType::F16;
    for (int64_t l = 0; l < hp.n_layer; ++l) {
      kv_cache.push_back(b.alloc_kv_cache(opt.n_ctx, kv, kt));
      cache_bytes_ += kv_cache.back().nbytes();
    }
    const int64_t B = opt.max_chunk;
    x = make(GgmlType::F32, hp.n_embd, B, scratch_bytes_);
    xn = make(GgmlType::F32, hp.n_embd, B, scratch_bytes_);
    q = make(GgmlType::F32, hp.n_head * hp.head_dim, B, scratch_bytes_);
    k = make(GgmlType::F32, kv, B, scratch_bytes_);
    v = make(GgmlType::F32, kv, B, scratch_bytes_);
    att = make(GgmlType::F32, hp.n_head * hp.head_dim, B, scratch_bytes_);
    gate = make(GgmlType::F32, hp.n_ff, B, scratch_bytes_);
    up = make(GgmlType::F32, hp.n_ff, B, scratch_bytes_);
    logits_last = make(GgmlType::F32, hp.n_vocab, 1, scratch_bytes_);
    n_vocab_ = hp.n_vocab;
  }
  int64_t n_ctx() const override { return opt_.n_ctx; }
  int64_t max_chunk() const override { return opt_.max_chunk; }
  uint64_t cache_bytes() const override { return cache_bytes_; }
  uint64_t scratch_bytes() const override { return scratch_bytes_; }
  // The KV cache is the whole state: a checkpoint is just a position.
  bool rewindable() const override { return true; }
  std::unique_ptr<StateCheckpoint> capture(int64_t pos) override {
    auto c = std::make_unique<StateCheckpoint>();
    c->pos = pos;
    return c;
  }
  void restore(const StateCheckpoint&) override {}

  // Logits for every row of a chunk, allocated the first time they are asked for.
  Tensor logits_all() {
    if (!logits_all_.data) logits_all_ = make(GgmlType::F32, n_vocab_, opt_.max_chunk, scratch_bytes_);
    return logits_all_;
  }

  std::vector<KvCache> kv_cache;         // per layer: n_ctx positions of n_head_kv * head_dim
  Tensor x, xn;                          // [B, dim] residual stream, normed / projected tmp
  Tensor q, att;                         // [B, n_head * head_dim]
  Tensor k, v;                           // [B, n_head_kv * head_dim]
  Tensor gate, up;                       // [B, n_ff]
  Tensor logits_last;                    // [1, n_vocab]

 private:
  Tensor make(GgmlType t, int64_t cols, int64_t rows, uint64_t& counter) {
    Tensor out = alloc_tensor(backend_, t, cols, rows, buffers_);
    counter += out.nbytes();
    return out;
  }
  Backend& backend_;
  StateOptions opt_;
  int64_t n_vocab_ = 0;
  uint64_t cache_bytes_ = 0, scratch_bytes_ = 0;
  Tensor logits_all_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

class Qwen3 final : public Model {
 public:
  Qwen3(const gguf::File& f, Backend& b) : backend_(b) {
    const std::string a = "qwen3.";
    hp_.arch = "qwen3";
    hp_.name = f.get_string("general.name", "");
    hp_.n_layer = static_cast<int64_t>(f.get_u64(a + "block_count"));
    hp_.n_embd = static_cast<int64_t>(f.get_u64(a + "embedding_length"));
    hp_.n_ff = static_cast<int64_t>(f.get_u64(a + "feed_forward_length"));
    hp_.n_head = static_cast<int64_t>(f.get_u64(a + "attention.head_count"));
    hp_.n_head_kv = static_cast<int64_t>(f.get_u64(a + "attention.head_count_kv", hp_.n_head));
    if (hp_.n_layer <= 0 || hp_.n_embd <= 0 || hp_.n_ff <= 0 || hp_.n_head <= 0 || hp_.n_head_kv <= 0)
      throw Error("qwen3: block_count, embedding_length, feed_forward_length and head counts must be positive");
    if (hp_.n_head % hp_.n_head_kv != 0)
      throw Error("qwen3: attention.head_count must be a multiple of attention.head_count_kv");
    hp_.head_dim = static_cast<int64_t>(f.get_u64(a + "attention.key_length", hp_.n_embd / hp_.n_head));
    const auto vlen = static_cast<int64_t>(f.get_u64(a + "attention.value_length", hp_.head_dim));
    if (vlen != hp_.head_dim) throw Error("qwen3: attention.value_length must equal attention.key_length");
    hp_.n_rot = static_cast<int64_t>(f.get_u64(a + "rope.dimension_count", hp_.head_dim));
    if (hp_.head_dim <= 0 || hp_.n_rot <= 0 || hp_.n_rot > hp_.head_dim || hp_.n_rot % 2 != 0)
      throw Error("qwen3: rope.dimension_count must be even and at most the head size");
    hp_.n_ctx_train = static_cast<int64_t>(f.get_u64(a + "context_length", 4096));
    hp_.rope_base = static_cast<float>(f.get_f64(a + "rope.freq_base", 10000.0));
    hp_.rms_eps = static_cast<float>(f.get_f64(a + "attention.layer_norm_rms_epsilon", 1e-6));

    const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
    if (emb.ne.size() != 2) throw Error("tensor 'token_embd.weight' must be 2-D");
    hp_.n_vocab = emb.ne[1];

    WeightLoader w(f, b);
    const int64_t dim = hp_.n_embd, hq = hp_.n_head * hp_.head_dim, hkv = hp_.n_head_kv * hp_.head_dim;
    tok_embd_ = w.get("token_embd.weight", dim, hp_.n_vocab);
    output_norm_ = w.get_f32("output_norm.weight", dim);
    hp_.tied_output = !w.has("output.weight");
    output_ = hp_.tied_output ? tok_embd_ : w.get("output.weight", dim, hp_.n_vocab);
    for (int64_t l = 0; l < hp_.n_layer; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      Layer L;
      L.attn_norm = w.get_f32(p + "attn_norm.weight", dim);
      L.wq = w.get(p + "attn_q.weight", dim, hq);
      L.wk = w.get(p + "attn_k.weight", dim, hkv);
      L.wv = w.get(p + "attn_v.weight", dim, hkv);
      L.q_norm = w.get_f32(p + "attn_q_norm.weight", hp_.head_dim);
      L.k_norm = w.get_f32(p + "attn_k_norm.weight", hp_.head_dim);
      L.wo = w.get(p + "attn_output.weight", hq, dim);
      L.ffn_norm = w.get_f32(p + "ffn_norm.weight", dim);
      L.ffn_gate = w.get(p + "ffn_gate.weight", dim, hp_.n_ff);
      L.ffn_up = w.get(p + "ffn_up.weight", dim, hp_.n_ff);
      L.ffn_down = w.get(p + "ffn_down.weight", hp_.n_ff, dim);
      layers_.push_back(L);
    }
    hp_.weight_bytes = w.bytes_loaded();
    // One decode step reads every weight once, but only one row of the embedding table.
    const uint64_t emb_bytes = tok_embd_.nbytes();
    hp_.bytes_per_token = hp_.weight_bytes - emb_bytes + tok_embd_.stride +
                          (hp_.tied_output ? emb_bytes : 0);
    for (const auto& t : f.tensors()) hp_.n_params += static_cast<uint64_t>(t.n_elements());
  }

  const ModelInfo& info() const override { return hp_; }

  std::unique_ptr<ModelState> new_state(const StateOptions& opt) override {
    if (opt.n_ctx <= 0 || opt.max_chunk <= 0) throw Error("context and chunk sizes must be positive");
    return std::make_unique<Qwen3State>(backend_, hp_, opt);
  }

  void forward(ModelState& base, const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits,
               float* logits) override {
    auto& s = static_cast<Qwen3State&>(base);
    if (n <= 0 || n > s.max_chunk()) throw Error("forward: chunk size out of range");
    if (pos0 + n > s.n_ctx()) throw Error("forward: positions past the context");
    for (int64_t i = 0; i < n; ++i)
      if (tokens[i] < 0 || tokens[i] >= hp_.n_vocab)
        throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary");
    Backend& b = backend_;
    const Tensor x = s.x.slice_rows(0, n), xn = s.xn.slice_rows(0, n);
    const Tensor q = s.q.slice_rows(0, n), k = s.k.slice_rows(0, n), v = s.v.slice_rows(0, n);
    const Tensor att = s.att.slice_rows(0, n);
    const Tensor gate = s.gate.slice_rows(0, n), up = s.up.slice_rows(0, n);
    const int64_t hd = hp_.head_dim;
    AttentionParams ap;
    ap.n_head = static_cast<int32_t>(hp_.n_head);
    ap.n_head_kv = static_cast<int32_t>(hp_.n_head_kv);
    ap.head_dim = static_cast<int32_t>(hd);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(hd));

    b.get_rows(tok_embd_, tokens, n, x);                       // x [n, dim]
    for (size_t l = 0; l < layers_.size(); ++l) {
      const Layer& L = layers_[l];
      b.rms_norm(x, L.attn_norm, hp_.rms_eps, xn);              // xn [n, dim]
      b.matmul(L.wq, xn, q);                                    // q [n, n_head * hd]
      b.matmul(L.wk, xn, k);                                    // k [n, n_head_kv * hd]
      b.matmul(L.wv, xn, v);                                    // v [n, n_head_kv * hd]
      b.rms_norm(q.reshape(hd), L.q_norm, hp_.rms_eps, q.reshape(hd));  // per head
      b.rms_norm(k.reshape(hd), L.k_norm, hp_.rms_eps, k.reshape(hd));
      b.rope_neox(q, ap.n_head, ap.head_dim, static_cast<int32_t>(hp_.n_rot), pos0, hp_.rope_base);
      b.rope_neox(k, ap.n_head_kv, ap.head_dim, static_cast<int32_t>(hp_.n_rot), pos0, hp_.rope_base);
      b.kv_store(s.kv_cache[l], k, v, pos0);
      b.attention(q, s.kv_cache[l], pos0, ap, att);               // att [n, n_head * hd]
      b.matmul(L.wo, att, xn);                                  // xn [n, dim]
      b.add(x, xn);                                             // residual
      b.rms_norm(x, L.ffn_norm, hp_.rms_eps, xn);
      b.matmul(L.ffn_gate, xn, gate);                           // gate [n, n_ff]
      b.matmul(L.ffn_up, xn, up);                               // up [n, n_ff]
      b.swiglu(gate, up, gate);
      b.matmul(L.ffn_down, gate, xn);                           // xn [n, dim]
      b.add(x, xn);
    }
    if (!logits) return;
    const Tensor rows = all_logits ? x : x.slice_rows(n - 1, 1);
    const Tensor normed = xn.slice_rows(0, rows.rows);
    b.rms_norm(rows, output_norm_, hp_.rms_eps, normed);
    const Tensor out = all_logits ? s.logits_all().slice_rows(0, n) : s.logits_last;
    b.matmul(output_, normed, out);                             // out [rows, n_vocab]
    b.download(out, logits, out.nbytes());
  }

 private:
  Backend& backend_;
  ModelInfo hp_;
  Tensor tok_embd_;     // [n_vocab, dim]
  Tensor output_norm_;  // [dim] f32
  Tensor output_;       // [n_vocab, dim] (token_embd when tied)
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen3(const gguf::File& f, Backend& b) { return std::make_unique<Qwen3>(f, b); }

}  // namespace df
