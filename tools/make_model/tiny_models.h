// Small valid random-weight models written in memory by df_make_model's writers, for tests and
// fuzz targets: a few layers of width 32, no tokenizer keys (df::load_model does not read
// them). Byte for byte what `df_make_model --layers 2 --dim 32 ...` writes, less the tokenizer.
#pragma once
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "qwen35_model.h"
#include "qwen3_model.h"

namespace df::make_model {

// qwen3: 2 layers, dim 32, ff 64, 2 heads (1 KV head) of 16, vocab 64.
inline BaseShape tiny_shape(bool tied = false) {
  BaseShape s;
  s.layers = 2, s.dim = 32, s.ff = 64, s.heads = 2, s.kv_heads = 1, s.head_dim = 16, s.vocab = 64;
  s.ctx = 256, s.rope_base = 10000.0f, s.rms_eps = 1e-6f, s.tied = tied;
  return s;
}

inline gguf::Writer tiny_qwen3_writer(GgmlType type = GgmlType::F32, bool tied = false) {
  gguf::Writer w;
  w.set_string("general.architecture", "qwen3");
  const BaseShape s = tiny_shape(tied);
  write_qwen3_keys(w, s);
  write_qwen3_tensors(w, s, type, Qwen35Scales{});
  return w;
}

// qwen35: 2 trunk layers (layer 1 full attention), delta-rule heads of 8 (1 key head, 2 value
// heads), conv kernel 4, rotary dims 8, and `mtp` MTP layers.
inline gguf::Writer tiny_qwen35_writer(GgmlType type = GgmlType::F32, int mtp = 1, bool tied = false) {
  gguf::Writer w;
  w.set_string("general.architecture", "qwen35");
  Qwen35Flags f;
  f.rot_dims = 8, f.ssm_state = 8, f.ssm_k_heads = 1, f.ssm_v_heads = 2, f.conv_kernel = 4;
  f.full_attn_interval = 2, f.mtp_layers = mtp;
  write_qwen35(w, "qwen35", tiny_shape(tied), f, type, Qwen35Scales{});
  return w;
}

// Runs a loaded model: tokens t0, t1 from position 0 (outputs for both rows), then a decode
// step at position 2. Throws df::Error when the model refuses; returns the last row's logits.
inline std::vector<float> smoke_forward(Model& model, int32_t t0, int32_t t1) {
  StateOptions so;
  so.n_ctx = 8;
  so.max_chunk = 4;
  auto state = model.new_state(so);
  const int32_t toks[2] = {t0, t1};
  const int64_t n_vocab = model.info().n_vocab;
  if (n_vocab <= 0) throw Error("smoke_forward: no vocabulary");
  ForwardOutputs o = model.forward(*state, Batch::sequence(toks, 2, 0, true));
  if (o.n_out() != 2 || o.logits.cols != n_vocab) throw Error("smoke_forward: wrong output rows");
  o = model.forward(*state, Batch::sequence(toks, 1, 2, false));
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  model.backend().download(o.logits.slice_rows(o.n_out() - 1, 1), logits.data(), logits.size() * sizeof(float));
  return logits;
}

}  // namespace df::make_model
