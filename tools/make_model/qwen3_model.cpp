// qwen3 writer of df_make_model (see make_model.cpp for how the weights are drawn).
// Tensor names and keys are those of llama.cpp's qwen3 loader (src/models/qwen3.cpp,
// src/llama-arch.cpp). 1-D tensors (norms) are always F32.
#include "qwen3_model.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "quant/cpu/kernels.h"
#include "random_weights.h"

namespace df::make_model {
namespace {

class ModelWriter {
 public:
  ModelWriter(gguf::Writer& w, uint64_t seed, GgmlType type) : w_(w), seed_(seed), type_(type) {}

  // A [rows, cols] weight (ne = {cols, rows}) with entries ~ N(0, sigma), stored in the
  // file's weight type, quantized row by row.
  void matrix(const std::string& name, int64_t cols, int64_t rows, float sigma) {
    if (cols % type_info(type_).block_elems != 0)
      throw Error("tensor " + name + ": row length " + std::to_string(cols) + " is not a multiple of the " +
                  std::string(type_name(type_)) + " block");
    const std::vector<uint8_t> data = random_matrix(name_seed(seed_, name), sigma, type_, cols, rows);
    w_.add_tensor(name, type_, {cols, rows}, data.data(), data.size());
    n_params_ += cols * rows;
  }

  // A norm weight [n] ~ 1 + N(0, noise), always F32; with random_signs each entry is negated
  // with probability 1/2.
  void norm(const std::string& name, int64_t n, float noise, bool random_signs = false) {
    Rng rng(name_seed(seed_, name));
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) {
      x = 1.0f + noise * rng.normal();
      if (random_signs && (rng.next() & 1)) x = -x;
    }
    w_.add_tensor(name, GgmlType::F32, {n}, v.data(), v.size() * sizeof(float));
    n_params_ += n;
  }

  int64_t n_params() const { return n_params_; }

 private:
  gguf::Writer& w_;
  uint64_t seed_;
  GgmlType type_;
  int64_t n_params_ = 0;
};

}  // namespace

void write_qwen3_keys(gguf::Writer& w, const BaseShape& s) {
  w.set_u32("qwen3.block_count", static_cast<uint32_t>(s.layers));
  w.set_u32("qwen3.context_length", static_cast<uint32_t>(s.ctx));
  w.set_u32("qwen3.embedding_length", static_cast<uint32_t>(s.dim));
  w.set_u32("qwen3.feed_forward_length", static_cast<uint32_t>(s.ff));
  w.set_u32("qwen3.attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_u32("qwen3.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_u32("qwen3.attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.set_u32("qwen3.attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.set_f32("qwen3.rope.freq_base", s.rope_base);
  w.set_f32("qwen3.attention.layer_norm_rms_epsilon", s.rms_eps);
}

int64_t write_qwen3_tensors(gguf::Writer& w, const BaseShape& s, GgmlType type, const Qwen35Scales& sc) {
  ModelWriter m(w, sc.seed, type);
  const int64_t n_embd = s.dim, n_ff = s.ff, q_dim = int64_t{s.heads} * s.head_dim,
                kv_dim = int64_t{s.kv_heads} * s.head_dim;
  const float embd_sigma = sc.logit_std / std::sqrt(static_cast<float>(n_embd));
  auto lin = [](int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); };
  // Shapes are [rows, cols] = [out, in]; GGUF stores ne = {in, out}.
  m.matrix("token_embd.weight", n_embd, s.vocab, embd_sigma);          // [n_vocab, n_embd]
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.norm(p + "attn_norm.weight", n_embd, sc.norm_noise);              // [n_embd]
    m.matrix(p + "attn_q.weight", n_embd, q_dim, lin(n_embd));         // [heads * head_dim, n_embd]
    m.matrix(p + "attn_k.weight", n_embd, kv_dim, lin(n_embd));        // [kv_heads * head_dim, n_embd]
    m.matrix(p + "attn_v.weight", n_embd, kv_dim, lin(n_embd));        // [kv_heads * head_dim, n_embd]
    m.norm(p + "attn_q_norm.weight", s.head_dim, sc.norm_noise);        // [head_dim]
    m.norm(p + "attn_k_norm.weight", s.head_dim, sc.norm_noise);        // [head_dim]
    m.matrix(p + "attn_output.weight", q_dim, n_embd, sc.resid_gain * lin(q_dim));     // [n_embd, heads * head_dim]
    m.norm(p + "ffn_norm.weight", n_embd, sc.norm_noise);               // [n_embd]
    m.matrix(p + "ffn_gate.weight", n_embd, n_ff, lin(n_embd));        // [n_ff, n_embd]
    m.matrix(p + "ffn_up.weight", n_embd, n_ff, lin(n_embd));          // [n_ff, n_embd]
    m.matrix(p + "ffn_down.weight", n_ff, n_embd, sc.resid_gain * lin(n_ff));          // [n_embd, n_ff]
  }
  // With a tied output the logit of token v is embd[v] . (g * x / rms(x)), and x still holds
  // the current token's embedding, so with g ~ 1 every token votes for itself and greedy
  // decoding repeats one token. Random signs in g make sum_i g_i * embd[t]_i^2 ~ 0 while
  // keeping the spread of the logits.
  m.norm("output_norm.weight", n_embd, sc.norm_noise, s.tied);          // [n_embd]
  if (!s.tied) m.matrix("output.weight", n_embd, s.vocab, embd_sigma);  // [n_vocab, n_embd]
  return m.n_params();
}

}  // namespace df::make_model
