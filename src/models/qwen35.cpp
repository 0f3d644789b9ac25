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
//   NeoX RoPE on the first rope.dimension_count dims; GQA over the KV cache;
//   out = attn_output . (attention * sigmoid(gate))
// qwen35moe (llama.cpp arch "qwen35moe") is the same trunk with the MLP replaced by routed
//   experts plus a gated shared expert (models/moe_ffn.h), in the MTP layers too.
// MTP layers (blk.N.nextn.*, N >= block_count - nextn_predict_layers) are loaded and checked
// but not run here.
// References read: llama.cpp src/models/qwen35.cpp, qwen35moe.cpp, delta-net-base.cpp,
// llama-graph.cpp (build_moe_ffn), conversion/qwen.py.
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "models/moe_ffn.h"
#include "models/qwen35.h"
#include "models/weights.h"

namespace df {
namespace {

struct Hparams {
  ModelInfo info;
  int64_t n_layer_all = 0;        // block_count: trunk + MTP layers
  std::vector<bool> recurrent;    // per trunk layer: Gated DeltaNet (true) or attention
  int64_t conv_dim = 0;           // 2 * Hk * S + Hv * S: channels of the convolution
  bool moe = false;               // qwen35moe: MoE FFN in every layer
  MoeShape moe_shape;
};

struct Layer {
  bool recurrent = false;
  Tensor attn_norm;     // [dim] f32
  Tensor post_norm;     // [dim] f32 (post_attention_norm: the MLP's input norm)
  // Gated DeltaNet
  Tensor wqkv;          // [conv_dim, dim]: rows q (Hk*S), k (Hk*S), v (Hv*S)
  Tensor wgate;         // [Hv*S, dim]  (attn_gate: z)
  Tensor conv1d;        // [conv_dim, K] f32
  Tensor dt_bias;       // [Hv] f32
  Tensor ssm_a;         // [Hv] f32 (-exp(A_log))
  Tensor ssm_beta;      // [Hv, dim]
  Tensor ssm_alpha;     // [Hv, dim]
  Tensor ssm_norm;      // [S] f32
  Tensor ssm_out;       // [dim, Hv*S]
  // Gated attention
  Tensor wq;            // [n_head * 2 * hd, dim]: per head query then gate
  Tensor wk;            // [n_head_kv * hd, dim]
  Tensor wv;            // [n_head_kv * hd, dim]
  Tensor q_norm;        // [hd] f32
  Tensor k_norm;        // [hd] f32
  Tensor wo;            // [dim, n_head * hd]
  // MLP (qwen35)
  Tensor ffn_gate;      // [n_ff, dim]
  Tensor ffn_up;        // [n_ff, dim]
  Tensor ffn_down;      // [dim, n_ff]
  // MoE FFN (qwen35moe)
  MoeFfn moe;
};

// Integer elements of an array key (any integer or bool element type).
std::vector<int64_t> int_array(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  if (!v) return {};
  std::vector<int64_t> out;
  std::visit(
      [&](const auto& vec) {
        using E = typename std::decay_t<decltype(vec)>::value_type;
        if constexpr (std::is_integral_v<E>) {
          for (auto e : vec) out.push_back(static_cast<int64_t>(e));
        } else {
          throw Error("key '" + key + "' must be an array of integers");
        }
      },
      v->as_array(key));
  return out;
}

// A key that is a number or an array of one value per layer: the value, which must be the same
// for every layer (per-layer expert counts are not supported).
int64_t uniform_u(const gguf::File& f, const std::string& key, int64_t dflt) {
  const gguf::Value* v = f.find(key);
  if (!v) return dflt;
  if (v->type != gguf::ValueType::ARRAY) return static_cast<int64_t>(f.get_u64(key));
  const auto vals = int_array(f, key);
  if (vals.empty()) throw Error("key '" + key + "' is an empty array");
  for (auto x : vals)
    if (x != vals[0]) throw Error("key '" + key + "' differs between layers (unsupported)");
  return vals[0];
}

Hparams read_hparams(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  const std::string a = arch + ".";
  auto u = [&](const std::string& k) { return static_cast<int64_t>(f.get_u64(a + k)); };
  auto u_or = [&](const std::string& k, int64_t d) {
    return static_cast<int64_t>(f.get_u64(a + k, static_cast<uint64_t>(d)));
  };
  Hparams hp;
  ModelInfo& m = hp.info;
  m.arch = arch;
  m.name = f.get_string("general.name", "");
  hp.n_layer_all = u("block_count");
  m.n_layer_nextn = u_or("nextn_predict_layers", 0);
  m.n_layer = hp.n_layer_all - m.n_layer_nextn;
  m.n_embd = u("embedding_length");
  m.n_ff = u("feed_forward_length");
  m.n_head = u("attention.head_count");
  m.n_head_kv = u_or("attention.head_count_kv", m.n_head);
  if (m.n_layer <= 0 || m.n_layer_nextn < 0 || m.n_embd <= 0 || m.n_ff <= 0 || m.n_head <= 0 || m.n_head_kv <= 0)
    throw Error("qwen35: block_count (above nextn_predict_layers), embedding_length, feed_forward_length and "
                "head counts must be positive");
  if (m.n_head % m.n_head_kv != 0)
    throw Error("qwen35: attention.head_count must be a multiple of attention.head_count_kv");
  m.head_dim = u_or("attention.key_length", m.n_embd / m.n_head);
  if (u_or("attention.value_length", m.head_dim) != m.head_dim)
    throw Error("qwen35: attention.value_length must equal attention.key_length");
  m.n_rot = u_or("rope.dimension_count", m.head_dim);
  if (m.head_dim <= 0 || m.n_rot <= 0 || m.n_rot > m.head_dim || m.n_rot % 2 != 0)
    throw Error("qwen35: rope.dimension_count must be even and at most the head size");
  m.n_ctx_train = u_or("context_length", 4096);
  m.rope_base = static_cast<float>(f.get_f64(a + "rope.freq_base", 10000.0));
  m.rms_eps = static_cast<float>(f.get_f64(a + "attention.layer_norm_rms_epsilon", 1e-6));

  // Qwen3.5 uses interleaved M-RoPE (llama.cpp IMROPE). For text every section gets the token
  // position except pairs that fall in no section (the 4th, extra position, which is 0 for
  // text). Only layouts where every rotated pair gets the token position are supported: they
  // are exactly NeoX RoPE on the first n_rot dims (true of the released [11, 11, 10, 0]).
  const auto sec = int_array(f, a + "rope.dimension_sections");
  if (!sec.empty()) {
    if (sec.size() < 3) throw Error("qwen35: rope.dimension_sections needs at least 3 entries");
    const int64_t s0 = sec[0], s1 = sec[1], s2 = sec[2], s3 = sec.size() > 3 ? sec[3] : 0;
    const int64_t total = s0 + s1 + s2 + s3;
    if (total <= 0) throw Error("qwen35: rope.dimension_sections are all zero");
    for (int64_t i = 0; i < m.n_rot / 2; ++i) {
      const int64_t sector = i % total;
      const bool text_pos = (sector % 3 == 0 && sector < 3 * s0) || (sector % 3 == 1 && sector < 3 * s1) ||
                            (sector % 3 == 2 && sector < 3 * s2);
      if (!text_pos)
        throw Error("qwen35: rope.dimension_sections leave rotary pair " + std::to_string(i) +
                    " without the token position (unsupported M-RoPE layout)");
    }
  }

  m.ssm_conv_kernel = u("ssm.conv_kernel");
  m.ssm_state = u("ssm.state_size");
  m.ssm_k_heads = u("ssm.group_count");
  m.ssm_v_heads = u("ssm.time_step_rank");
  const int64_t inner = u("ssm.inner_size");
  if (m.ssm_conv_kernel < 2 || m.ssm_conv_kernel > 16)
    throw Error("qwen35: ssm.conv_kernel must be in [2, 16]");
  if (m.ssm_state <= 0 || m.ssm_k_heads <= 0 || m.ssm_v_heads <= 0 || m.ssm_v_heads % m.ssm_k_heads != 0)
    throw Error("qwen35: ssm.time_step_rank (value heads) must be a positive multiple of ssm.group_count (key heads)");
  if (inner != m.ssm_state * m.ssm_v_heads)
    throw Error("qwen35: ssm.inner_size must be ssm.state_size * ssm.time_step_rank (value head size = state size)");
  hp.conv_dim = 2 * m.ssm_k_heads * m.ssm_state + inner;

  hp.recurrent.assign(static_cast<size_t>(m.n_layer), false);
  const auto rec = int_array(f, a + "attention.recurrent_layers");
  if (!rec.empty()) {
    if (static_cast<int64_t>(rec.size()) < m.n_layer)
      throw Error("qwen35: attention.recurrent_layers has fewer entries than trunk layers");
    for (int64_t l = 0; l < m.n_layer; ++l) hp.recurrent[static_cast<size_t>(l)] = rec[static_cast<size_t>(l)] != 0;
  } else {
    const int64_t interval = u_or("full_attention_interval", 4);
    if (interval <= 0) throw Error("qwen35: full_attention_interval must be positive");
    for (int64_t l = 0; l < m.n_layer; ++l) hp.recurrent[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  for (bool r : hp.recurrent) m.n_layer_recurrent += r ? 1 : 0;

  hp.moe = arch == "qwen35moe";
  if (hp.moe) {  // llama.cpp qwen35moe: softmax gating, weights renormalised, no scale
    MoeShape& e = hp.moe_shape;
    e.n_embd = m.n_embd;
    e.n_expert = u("expert_count");
    e.n_used = uniform_u(f, a + "expert_used_count", 0);
    if (e.n_expert <= 0 || e.n_used <= 0 || e.n_used > e.n_expert || e.n_expert > 512)
      throw Error(arch + ": expert_count must be in [1, 512] and expert_used_count in [1, expert_count]");
    e.n_ff_exp = uniform_u(f, a + "expert_feed_forward_length", m.n_ff / e.n_used);
    e.n_ff_shexp = u_or("expert_shared_feed_forward_length", m.n_ff);
    if (e.n_ff_exp <= 0 || e.n_ff_shexp <= 0)
      throw Error(arch + ": expert_feed_forward_length and expert_shared_feed_forward_length must be positive");
    e.norm_weights = true;
    e.weights_scale = 0.0f;
    m.n_expert = e.n_expert;
    m.n_expert_used = e.n_used;
    m.n_ff_exp = e.n_ff_exp;
    m.n_ff_shexp = e.n_ff_shexp;
  }
  return hp;
}

// One checkpoint: copies of every recurrent layer's conv and delta-rule states.
class Qwen35Checkpoint final : public StateCheckpoint {
 public:
  std::vector<Tensor> conv, ssm;
  std::vector<std::shared_ptr<Buffer>> buffers;
  const void* owner = nullptr;  // the state it was captured from
};

class Qwen35State final : public ModelState {
 public:
  Qwen35State(Backend& b, const Hparams& hp, const StateOptions& opt) : backend_(b), opt_(opt) {
    const ModelInfo& m = hp.info;
    const int64_t kv = m.n_head_kv * m.head_dim, S = m.ssm_state, Hv = m.ssm_v_heads;
    const GgmlType kt = opt.kv_f32 ? GgmlType::F32 : GgmlType::F16;
    for (int64_t l = 0; l < m.n_layer; ++l) {
      if (hp.recurrent[static_cast<size_t>(l)]) {
        conv.push_back(make(GgmlType::F32, hp.conv_dim, m.ssm_conv_kernel - 1, cache_bytes_));  // [K-1, conv_dim]
        ssm.push_back(make(GgmlType::F32, S, Hv * S, cache_bytes_));                            // [Hv*S, S]
      } else {
        kv_cache.push_back(b.alloc_kv_cache(opt.n_ctx, kv, kt));  // n_ctx positions of n_head_kv * hd
        cache_bytes_ += kv_cache.back().nbytes();
      }
    }
    const int64_t B = opt.max_chunk, qd = m.n_head * m.head_dim;
    x = make(GgmlType::F32, m.n_embd, B, scratch_bytes_);
    xn = make(GgmlType::F32, m.n_embd, B, scratch_bytes_);
    if (m.n_layer_recurrent > 0) {
      qkv = make(GgmlType::F32, hp.conv_dim, B, scratch_bytes_);
      conv_out = make(GgmlType::F32, hp.conv_dim, B, scratch_bytes_);
      z = make(GgmlType::F32, Hv * S, B, scratch_bytes_);
      o = make(GgmlType::F32, Hv * S, B, scratch_bytes_);
      beta = make(GgmlType::F32, Hv, B, scratch_bytes_);
      g = make(GgmlType::F32, Hv, B, scratch_bytes_);
    }
    if (m.n_layer_recurrent < m.n_layer) {
      qg = make(GgmlType::F32, 2 * qd, B, scratch_bytes_);
      q = make(GgmlType::F32, qd, B, scratch_bytes_);
      gate = make(GgmlType::F32, qd, B, scratch_bytes_);
      k = make(GgmlType::F32, kv, B, scratch_bytes_);
      v = make(GgmlType::F32, kv, B, scratch_bytes_);
      att = make(GgmlType::F32, qd, B, scratch_bytes_);
    }
    if (hp.moe) {
      moe = make_moe_scratch(hp.moe_shape, [&](int64_t cols, GgmlType t) { return make(t, cols, B, scratch_bytes_); });
      ffn_out = make(GgmlType::F32, m.n_embd, B, scratch_bytes_);
    } else {
      ffn_gate = make(GgmlType::F32, m.n_ff, B, scratch_bytes_);
      ffn_up = make(GgmlType::F32, m.n_ff, B, scratch_bytes_);
    }
    logits_last = make(GgmlType::F32, m.n_vocab, 1, scratch_bytes_);
    n_vocab_ = m.n_vocab;
    for (const auto& t : conv) max_state_bytes_ = std::max<uint64_t>(max_state_bytes_, t.nbytes());
    for (const auto& t : ssm) max_state_bytes_ = std::max<uint64_t>(max_state_bytes_, t.nbytes());
  }

  int64_t n_ctx() const override { return opt_.n_ctx; }
  int64_t max_chunk() const override { return opt_.max_chunk; }
  uint64_t cache_bytes() const override { return cache_bytes_; }
  uint64_t scratch_bytes() const override { return scratch_bytes_; }
  bool rewindable() const override { return conv.empty(); }

  std::unique_ptr<StateCheckpoint> capture(int64_t at) override {
    if (at != pos) throw Error("checkpoint at position " + std::to_string(at) + ", but the state is at " + std::to_string(pos));
    auto c = std::make_unique<Qwen35Checkpoint>();
    c->pos = pos;
    c->owner = this;
    auto copy_of = [&](const Tensor& src, std::vector<Tensor>& dst) {
      auto buf = backend_.alloc(src.nbytes());
      Tensor t = src;
      t.data = buf->data();
      backend_.copy(src, t);
      c->buffers.push_back(std::move(buf));
      c->bytes += t.nbytes();
      dst.push_back(t);
    };
    for (const auto& t : conv) copy_of(t, c->conv);
    for (const auto& t : ssm) copy_of(t, c->ssm);
    return c;
  }

  void restore(const StateCheckpoint& base) override {
    const auto* c = dynamic_cast<const Qwen35Checkpoint*>(&base);
    if (!c || c->owner != this) throw Error("restore: the checkpoint was not captured from this session's state");
    for (size_t i = 0; i < conv.size(); ++i) backend_.copy(c->conv[i], conv[i]);
    for (size_t i = 0; i < ssm.size(); ++i) backend_.copy(c->ssm[i], ssm[i]);
    pos = c->pos;
  }

  // A new sequence: recurrent and conv states start at zero.
  void reset() {
    std::vector<uint8_t> zeros(max_state_bytes_, 0);
    for (const auto& t : conv) backend_.upload(t, zeros.data(), t.nbytes());
    for (const auto& t : ssm) backend_.upload(t, zeros.data(), t.nbytes());
    pos = 0;
  }

  Tensor logits_all() {
    if (!logits_all_.data) logits_all_ = make(GgmlType::F32, n_vocab_, opt_.max_chunk, scratch_bytes_);
    return logits_all_;
  }

  int64_t pos = 0;                       // tokens the recurrent state has seen; -1: invalid
  std::vector<Tensor> conv;              // per DeltaNet layer [K-1, conv_dim] f32: last inputs
  std::vector<Tensor> ssm;               // per DeltaNet layer [Hv*S, S] f32: row (h, j) = S_h[., j]
  std::vector<KvCache> kv_cache;         // per attention layer: n_ctx positions of n_head_kv * hd
  Tensor x, xn;                          // [B, dim] residual stream; normed input / mixer output
  Tensor qkv, conv_out;                  // [B, conv_dim] projection, convolved + SiLU
  Tensor z, o;                           // [B, Hv*S] output gate, delta-rule output
  Tensor beta, g;                        // [B, Hv] write strength, log decay
  Tensor qg;                             // [B, n_head * 2 * hd] query + gate, interleaved per head
  Tensor q, gate, att;                   // [B, n_head * hd]
  Tensor k, v;                           // [B, n_head_kv * hd]
  Tensor ffn_gate, ffn_up;               // [B, n_ff]
  MoeScratch moe;                        // qwen35moe: the MoE FFN's activations
  Tensor ffn_out;                        // [B, dim] qwen35moe: MoE FFN output
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
  uint64_t cache_bytes_ = 0, scratch_bytes_ = 0, max_state_bytes_ = 0;
  Tensor logits_all_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

// Rows [n * n_head, hd] of one half (part 0: query, 1: gate) of a dense [n, n_head * 2 * hd]
// projection whose heads hold [query | gate].
Tensor head_half(const Tensor& qg, int64_t n_head, int64_t hd, int64_t part) {
  Tensor t = qg;
  t.data = static_cast<uint8_t*>(qg.data) + static_cast<size_t>(part * hd) * sizeof(float);
  t.cols = hd;
  t.rows = qg.rows * n_head;
  t.stride = static_cast<size_t>(2 * hd) * sizeof(float);
  return t;
}

class Qwen35 final : public Model {
 public:
  Qwen35(const gguf::File& f, Backend& b) : backend_(b), hp_(read_hparams(f)) {
    ModelInfo& m = hp_.info;
    const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
    if (emb.ne.size() != 2) throw Error("tensor 'token_embd.weight' must be 2-D");
    m.n_vocab = emb.ne[1];

    WeightLoader w(f, b);
    const int64_t dim = m.n_embd;
    tok_embd_ = w.get("token_embd.weight", dim, m.n_vocab);
    output_norm_ = w.get_f32("output_norm.weight", dim);
    m.tied_output = !w.has("output.weight");
    output_ = m.tied_output ? tok_embd_ : w.get("output.weight", dim, m.n_vocab);
    for (int64_t l = 0; l < m.n_layer; ++l) layers_.push_back(load_layer(w, l, hp_.recurrent[static_cast<size_t>(l)]));
    m.weight_bytes = w.bytes_loaded();
    // One decode step reads every trunk weight once, but one row of the embedding table (and of
    // a MoE layer only the router, the chosen experts and the shared expert).
    const uint64_t emb_bytes = tok_embd_.nbytes();
    m.bytes_per_token = m.weight_bytes - emb_bytes + tok_embd_.stride + (m.tied_output ? emb_bytes : 0);
    if (hp_.moe)
      for (const Layer& L : layers_)
        m.bytes_per_token -= L.moe.gate_exps.nbytes() + L.moe.up_exps.nbytes() + L.moe.down_exps.nbytes() +
                             L.moe.router.nbytes() + L.moe.shexp_gate_inp.nbytes() + L.moe.shexp_gate.nbytes() +
                             L.moe.shexp_up.nbytes() + L.moe.shexp_down.nbytes() -
                             moe_bytes_per_token(hp_.moe_shape, L.moe);

    // MTP layers: checked, not run.
    WeightLoader mtp(f, b);
    for (int64_t l = m.n_layer; l < hp_.n_layer_all; ++l) check_mtp_layer(mtp, l);
    m.weight_bytes += mtp.bytes_loaded();
    for (const auto& t : f.tensors()) m.n_params += static_cast<uint64_t>(t.n_elements());
  }

  const ModelInfo& info() const override { return hp_.info; }

  std::unique_ptr<ModelState> new_state(const StateOptions& opt) override {
    if (opt.n_ctx <= 0 || opt.max_chunk <= 0) throw Error("context and chunk sizes must be positive");
    return std::make_unique<Qwen35State>(backend_, hp_, opt);
  }

  void forward(ModelState& base, const int32_t* tokens, int64_t n, int64_t pos0, bool all_logits,
               float* logits) override {
    auto& s = static_cast<Qwen35State&>(base);
    const ModelInfo& m = hp_.info;
    if (n <= 0 || n > s.max_chunk()) throw Error("forward: chunk size out of range");
    if (pos0 < 0 || pos0 + n > s.n_ctx()) throw Error("forward: positions past the context");
    for (int64_t i = 0; i < n; ++i)
      if (tokens[i] < 0 || tokens[i] >= m.n_vocab)
        throw Error("token id " + std::to_string(tokens[i]) + " is outside the vocabulary");
    if (pos0 == 0) {
      s.reset();
    } else if (pos0 != s.pos) {
      throw Error("forward at position " + std::to_string(pos0) + ", but the recurrent state is at " +
                  std::to_string(s.pos) + " (restore a checkpoint first)");
    }
    s.pos = -1;  // invalid until this chunk has run through
    Backend& b = backend_;
    const Tensor x = s.x.slice_rows(0, n), xn = s.xn.slice_rows(0, n);
    b.get_rows(tok_embd_, tokens, n, x);                        // x [n, dim]
    size_t i_rec = 0, i_att = 0;
    for (const Layer& L : layers_) {
      b.rms_norm(x, L.attn_norm, m.rms_eps, xn);                // xn [n, dim]
      if (L.recurrent) {
        delta_net(L, s, n, i_rec++);                            // xn <- mixer(xn)
      } else {
        attention(L, s, n, pos0, i_att++);
      }
      b.add(x, xn);                                             // residual
      b.rms_norm(x, L.post_norm, m.rms_eps, xn);
      if (hp_.moe) {
        const Tensor out = s.ffn_out.slice_rows(0, n);
        moe_ffn(b, hp_.moe_shape, L.moe, s.moe, xn, out);       // out [n, dim]
        b.add(x, out);
        continue;
      }
      const Tensor gate = s.ffn_gate.slice_rows(0, n), up = s.ffn_up.slice_rows(0, n);
      b.matmul(L.ffn_gate, xn, gate);                           // gate [n, n_ff]
      b.matmul(L.ffn_up, xn, up);                               // up [n, n_ff]
      b.swiglu(gate, up, gate);
      b.matmul(L.ffn_down, gate, xn);                           // xn [n, dim]
      b.add(x, xn);
    }
    s.pos = pos0 + n;
    if (!logits) return;
    const Tensor rows = all_logits ? x : x.slice_rows(n - 1, 1);
    const Tensor normed = xn.slice_rows(0, rows.rows);
    b.rms_norm(rows, output_norm_, m.rms_eps, normed);
    const Tensor out = all_logits ? s.logits_all().slice_rows(0, n) : s.logits_last;
    b.matmul(output_, normed, out);                             // out [rows, n_vocab]
    b.download(out, logits, out.nbytes());
  }

 private:
  // Gated DeltaNet mixer: s.xn [n, dim] (normed input) -> s.xn [n, dim]
  void delta_net(const Layer& L, Qwen35State& s, int64_t n, size_t i) {
    const ModelInfo& m = hp_.info;
    Backend& b = backend_;
    const int64_t S = m.ssm_state, kd = m.ssm_k_heads * S, vd = m.ssm_v_heads * S;
    const Tensor xn = s.xn.slice_rows(0, n);
    const Tensor qkv = s.qkv.slice_rows(0, n), conv = s.conv_out.slice_rows(0, n);
    const Tensor z = s.z.slice_rows(0, n), o = s.o.slice_rows(0, n);
    const Tensor beta = s.beta.slice_rows(0, n), g = s.g.slice_rows(0, n);
    b.matmul(L.wqkv, xn, qkv);                                  // qkv [n, conv_dim]
    b.matmul(L.wgate, xn, z);                                   // z [n, Hv*S]
    b.matmul(L.ssm_beta, xn, beta);                             // beta [n, Hv]
    b.unary(UnaryOp::SIGMOID, beta, beta);
    b.matmul(L.ssm_alpha, xn, g);                               // g [n, Hv]
    b.softplus_scale(g, L.dt_bias, L.ssm_a, g);                 // log decay (<= 0)
    b.ssm_conv(qkv, s.conv[i], L.conv1d, conv);                 // conv [n, conv_dim]
    b.unary(UnaryOp::SILU, conv, conv);
    const Tensor q = conv.slice_cols(0, kd);                    // q [n, Hk*S]
    const Tensor k = conv.slice_cols(kd, kd);                   // k [n, Hk*S]
    const Tensor v = conv.slice_cols(2 * kd, vd);               // v [n, Hv*S]
    b.l2_norm(q, S, m.rms_eps, q);
    b.l2_norm(k, S, m.rms_eps, k);
    b.gated_delta_rule(q, k, v, g, beta, s.ssm[i], 1.0f / std::sqrt(static_cast<float>(S)), o);  // o [n, Hv*S]
    b.rms_norm(o.reshape(S), L.ssm_norm, m.rms_eps, o.reshape(S));  // per value head
    b.swiglu(z, o, o);                                          // o = silu(z) * o
    b.matmul(L.ssm_out, o, xn);                                 // xn [n, dim]
  }

  // Gated attention mixer: s.xn [n, dim] -> s.xn [n, dim]
  void attention(const Layer& L, Qwen35State& s, int64_t n, int64_t pos0, size_t i) {
    const ModelInfo& m = hp_.info;
    Backend& b = backend_;
    const int64_t hd = m.head_dim;
    const Tensor xn = s.xn.slice_rows(0, n), qg = s.qg.slice_rows(0, n);
    const Tensor q = s.q.slice_rows(0, n), gate = s.gate.slice_rows(0, n), att = s.att.slice_rows(0, n);
    const Tensor k = s.k.slice_rows(0, n), v = s.v.slice_rows(0, n);
    AttentionParams ap;
    ap.n_head = static_cast<int32_t>(m.n_head);
    ap.n_head_kv = static_cast<int32_t>(m.n_head_kv);
    ap.head_dim = static_cast<int32_t>(hd);
    ap.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    b.matmul(L.wq, xn, qg);                                     // qg [n, n_head * 2 * hd]
    b.copy(head_half(qg, m.n_head, hd, 0), q.reshape(hd));      // q [n, n_head * hd]
    b.copy(head_half(qg, m.n_head, hd, 1), gate.reshape(hd));   // gate [n, n_head * hd]
    b.matmul(L.wk, xn, k);                                      // k [n, n_head_kv * hd]
    b.matmul(L.wv, xn, v);                                      // v [n, n_head_kv * hd]
    b.rms_norm(q.reshape(hd), L.q_norm, m.rms_eps, q.reshape(hd));  // per head
    b.rms_norm(k.reshape(hd), L.k_norm, m.rms_eps, k.reshape(hd));
    b.rope_neox(q, ap.n_head, ap.head_dim, static_cast<int32_t>(m.n_rot), pos0, m.rope_base);
    b.rope_neox(k, ap.n_head_kv, ap.head_dim, static_cast<int32_t>(m.n_rot), pos0, m.rope_base);
    b.kv_store(s.kv_cache[i], k, v, pos0);
    b.attention(q, s.kv_cache[i], pos0, ap, att);               // att [n, n_head * hd]
    b.sigmoid_mul(gate, att, att);
    b.matmul(L.wo, att, xn);                                    // xn [n, dim]
  }

  // A 2-D f32 tensor (small parameters llama.cpp never quantizes).
  static Tensor get_f32_2d(WeightLoader& w, const std::string& name, int64_t cols, int64_t rows) {
    Tensor t = w.get(name, cols, rows);
    if (t.type != GgmlType::F32)
      throw Error("tensor '" + name + "' must be f32, found " + std::string(type_name(t.type)));
    return t;
  }

  void load_attention(WeightLoader& w, const std::string& p, Layer& L) const {
    const ModelInfo& m = hp_.info;
    const int64_t dim = m.n_embd, hd = m.head_dim, qd = m.n_head * hd, kvd = m.n_head_kv * hd;
    L.wq = w.get(p + "attn_q.weight", dim, 2 * qd);
    L.wk = w.get(p + "attn_k.weight", dim, kvd);
    L.wv = w.get(p + "attn_v.weight", dim, kvd);
    L.q_norm = w.get_f32(p + "attn_q_norm.weight", hd);
    L.k_norm = w.get_f32(p + "attn_k_norm.weight", hd);
    L.wo = w.get(p + "attn_output.weight", qd, dim);
  }

  void load_norms_mlp(WeightLoader& w, const std::string& p, Layer& L) const {
    const ModelInfo& m = hp_.info;
    L.attn_norm = w.get_f32(p + "attn_norm.weight", m.n_embd);
    L.post_norm = w.get_f32(p + "post_attention_norm.weight", m.n_embd);
    if (hp_.moe) {
      L.moe = load_moe_ffn(w, p, hp_.moe_shape);
      return;
    }
    L.ffn_gate = w.get(p + "ffn_gate.weight", m.n_embd, m.n_ff);
    L.ffn_up = w.get(p + "ffn_up.weight", m.n_embd, m.n_ff);
    L.ffn_down = w.get(p + "ffn_down.weight", m.n_ff, m.n_embd);
  }

  Layer load_layer(WeightLoader& w, int64_t l, bool recurrent) const {
    const ModelInfo& m = hp_.info;
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    L.recurrent = recurrent;
    load_norms_mlp(w, p, L);
    if (!recurrent) {
      load_attention(w, p, L);
      return L;
    }
    const int64_t dim = m.n_embd, S = m.ssm_state, Hv = m.ssm_v_heads, vd = Hv * S;
    L.wqkv = w.get(p + "attn_qkv.weight", dim, hp_.conv_dim);
    L.wgate = w.get(p + "attn_gate.weight", dim, vd);
    L.conv1d = get_f32_2d(w, p + "ssm_conv1d.weight", m.ssm_conv_kernel, hp_.conv_dim);
    L.dt_bias = w.get_f32(p + "ssm_dt.bias", Hv);
    L.ssm_a = w.get_f32(p + "ssm_a", Hv);
    L.ssm_beta = w.get(p + "ssm_beta.weight", dim, Hv);
    L.ssm_alpha = w.get(p + "ssm_alpha.weight", dim, Hv);
    L.ssm_norm = w.get_f32(p + "ssm_norm.weight", S);
    L.ssm_out = w.get(p + "ssm_out.weight", vd, dim);
    return L;
  }

  // An MTP block: a full-attention decoder block plus the nextn projections (llama.cpp
  // load_block_mtp). Checked for presence and shapes only.
  void check_mtp_layer(WeightLoader& w, int64_t l) const {
    const ModelInfo& m = hp_.info;
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    load_norms_mlp(w, p, L);
    load_attention(w, p, L);
    w.get(p + "nextn.eh_proj.weight", 2 * m.n_embd, m.n_embd);  // [dim, 2 * dim]
    w.get_f32(p + "nextn.enorm.weight", m.n_embd);
    w.get_f32(p + "nextn.hnorm.weight", m.n_embd);
    if (w.has(p + "nextn.embed_tokens.weight")) w.get(p + "nextn.embed_tokens.weight", m.n_embd, m.n_vocab);
    if (w.has(p + "nextn.shared_head_head.weight")) w.get(p + "nextn.shared_head_head.weight", m.n_embd, m.n_vocab);
    if (w.has(p + "nextn.shared_head_norm.weight")) w.get_f32(p + "nextn.shared_head_norm.weight", m.n_embd);
  }

  Backend& backend_;
  Hparams hp_;
  Tensor tok_embd_;     // [n_vocab, dim]
  Tensor output_norm_;  // [dim] f32
  Tensor output_;       // [n_vocab, dim] (token_embd when tied)
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> make_qwen35(const gguf::File& f, Backend& b) { return std::make_unique<Qwen35>(f, b); }

}  // namespace df
