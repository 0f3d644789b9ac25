// qwen35 hyperparameters and layer weights (llama.cpp's llm_build_qwen35 loader and
// load_block_mtp): checked shapes, the layer pattern, the rotary section table.
#include <string>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/qwen35_parts.h"

namespace df::qwen35 {

Hparams read_hparams(const gguf::File& f) {
  const blocks::KeyReader k(f, "qwen35");
  Hparams hp;
  ModelInfo& m = hp.info;
  m.arch = "qwen35";
  hp.n_layer_all = k.u("block_count");
  m.n_layer_nextn = k.u_or("nextn_predict_layers", 0);
  m.n_layer = hp.n_layer_all - m.n_layer_nextn;
  if (m.n_layer <= 0 || m.n_layer_nextn < 0)
    throw Error("qwen35: block_count must be above nextn_predict_layers");
  blocks::read_common_hparams(k, m);

  // Qwen3.5 uses interleaved M-RoPE (ggml IMROPE); for text, sections 0..2 take the token
  // position and section 3 position 0 (the rope op implements the rule for any layout).
  const auto sec = k.ints("rope.dimension_sections");
  if (!sec.empty()) {
    if (sec.size() < 3 || sec.size() > 4) throw Error("qwen35: rope.dimension_sections needs 3 or 4 entries");
    int64_t total = 0;
    for (size_t i = 0; i < sec.size(); ++i) {
      if (sec[i] < 0 || sec[i] > m.head_dim) throw Error("qwen35: rope.dimension_sections entries out of range");
      hp.sections[i] = static_cast<int32_t>(sec[i]);
      total += sec[i];
    }
    if (hp.sections[0] + hp.sections[1] + hp.sections[2] <= 0)
      throw Error("qwen35: rope.dimension_sections 0..2 are all zero");
    if (total > m.head_dim) throw Error("qwen35: rope.dimension_sections sum past the head size");
  }

  m.ssm_conv_kernel = k.u("ssm.conv_kernel");
  m.ssm_state = k.u("ssm.state_size");
  m.ssm_k_heads = k.u("ssm.group_count");
  m.ssm_v_heads = k.u("ssm.time_step_rank");
  const int64_t inner = k.u("ssm.inner_size");
  if (m.ssm_conv_kernel < 2 || m.ssm_conv_kernel > 16) throw Error("qwen35: ssm.conv_kernel must be in [2, 16]");
  if (m.ssm_state <= 0 || m.ssm_k_heads <= 0 || m.ssm_v_heads <= 0 || m.ssm_v_heads % m.ssm_k_heads != 0)
    throw Error("qwen35: ssm.time_step_rank (value heads) must be a positive multiple of ssm.group_count (key heads)");
  if (inner != m.ssm_state * m.ssm_v_heads)
    throw Error("qwen35: ssm.inner_size must be ssm.state_size * ssm.time_step_rank (value head size = state size)");
  hp.conv_dim = 2 * m.ssm_k_heads * m.ssm_state + inner;

  hp.recurrent.assign(static_cast<size_t>(m.n_layer), false);
  const auto rec = k.ints("attention.recurrent_layers");
  if (!rec.empty()) {
    if (static_cast<int64_t>(rec.size()) < m.n_layer)
      throw Error("qwen35: attention.recurrent_layers has fewer entries than trunk layers");
    for (int64_t l = 0; l < m.n_layer; ++l) hp.recurrent[static_cast<size_t>(l)] = rec[static_cast<size_t>(l)] != 0;
  } else {
    const int64_t interval = k.u_or("full_attention_interval", 4);
    if (interval <= 0) throw Error("qwen35: full_attention_interval must be positive");
    for (int64_t l = 0; l < m.n_layer; ++l) hp.recurrent[static_cast<size_t>(l)] = (l + 1) % interval != 0;
  }
  for (bool r : hp.recurrent) m.n_layer_recurrent += r ? 1 : 0;
  blocks::read_vocab(f, m);
  return hp;
}

namespace {

// A 2-D f32 tensor (small parameters llama.cpp never quantizes).
Tensor get_f32_2d(WeightLoader& w, const std::string& name, int64_t cols, int64_t rows) {
  Tensor t = w.get(name, cols, rows);
  if (t.type != GgmlType::F32)
    throw Error("tensor '" + name + "' must be f32, found " + std::string(type_name(t.type)));
  return t;
}

}  // namespace

Layer load_layer(WeightLoader& w, const Hparams& hp, int64_t l, bool recurrent) {
  const ModelInfo& m = hp.info;
  const std::string p = "blk." + std::to_string(l) + ".";
  Layer L;
  L.recurrent = recurrent;
  L.attn_norm = w.get_f32(p + "attn_norm.weight", m.n_embd);
  L.post_norm = w.get_f32(p + "post_attention_norm.weight", m.n_embd);
  L.ffn = blocks::load_ffn(w, p, m);
  if (!recurrent) {
    L.attn = blocks::load_attention(w, p, m, /*gated=*/true);
    return L;
  }
  const int64_t dim = m.n_embd, S = m.ssm_state, Hv = m.ssm_v_heads, vd = Hv * S;
  DeltaNetWeights& d = L.dn;
  d.wqkv = w.get(p + "attn_qkv.weight", dim, hp.conv_dim);
  d.wgate = w.get(p + "attn_gate.weight", dim, vd);
  d.conv1d = get_f32_2d(w, p + "ssm_conv1d.weight", m.ssm_conv_kernel, hp.conv_dim);
  d.dt_bias = w.get_f32(p + "ssm_dt.bias", Hv);
  d.ssm_a = w.get_f32(p + "ssm_a", Hv);
  d.ssm_beta = w.get(p + "ssm_beta.weight", dim, Hv);
  d.ssm_alpha = w.get(p + "ssm_alpha.weight", dim, Hv);
  d.ssm_norm = w.get_f32(p + "ssm_norm.weight", S);
  d.ssm_out = w.get(p + "ssm_out.weight", vd, dim);
  return L;
}

}  // namespace df::qwen35
