// Random-weight qwen35 (Qwen3.5 hybrid: Gated DeltaNet + gated attention, optional MTP layers)
// models for df_make_model (--arch qwen35).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "gguf/gguf.h"
#include "quant/types.h"

namespace df::make_model {

// The shape df_make_model resolved from its common flags and preset.
struct BaseShape {
  int layers = 0;  // trunk layers (MTP layers come on top)
  int dim = 0, ff = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, ctx = 0;
  float rope_base = 0, rms_eps = 0;
  bool tied = false;
};

// Flags of --arch qwen35 (0 = default).
struct Qwen35Flags {
  int rot_dims = 0;         // rope.dimension_count (default head_dim / 4, as Qwen3.5)
  int ssm_state = 0;        // ssm.state_size: delta-rule head size (default 64)
  int ssm_k_heads = 0;      // ssm.group_count (default 2)
  int ssm_v_heads = 0;      // ssm.time_step_rank (default 4)
  int conv_kernel = 0;      // ssm.conv_kernel (default 4)
  int full_attn_interval = 0;  // default 4: every 4th layer is full attention
  int mtp_layers = 0;       // nextn_predict_layers
  std::vector<int> rope_sections;  // rope.dimension_sections (default: 3 text sections over the pairs)
  std::string mix;          // "substring=type,...": per-tensor type overrides of --type
  // --arch qwen35moe: the MLP of every layer (MTP layers too) is a routed MoE + shared expert
  int experts = 0;          // expert_count (default 8)
  int experts_used = 0;     // expert_used_count (default 2)
  int expert_ff = 0;        // expert_feed_forward_length (default --ff / experts-used)
  int shexp_ff = 0;         // expert_shared_feed_forward_length (default --ff)
  float router_std = 0;     // router logits' standard deviation (default 1)
  // > 0: quantized matrices of more rows repeat this many random rows (speed benchmarks of
  // large shapes, written at memory speed; F32 matrices such as the router stay random)
  int row_pool = 0;
};
void add_qwen35_flags(CLI::App& app, Qwen35Flags& f);

struct Qwen35Scales {
  uint64_t seed = 42;
  float logit_std = 4.0f, norm_noise = 0.1f, resid_gain = 1.0f;
  bool fast_random = false;  // weight matrices from Rng::normal_fast (real-shape benchmark files)
};

// Writes the <arch>.* keys (arch "qwen35" or "qwen35moe") and every tensor (the tokenizer
// keys are already in w; s.vocab is the vocabulary size). Returns the number of parameters.
int64_t write_qwen35(gguf::Writer& w, const std::string& arch, const BaseShape& s, const Qwen35Flags& f,
                     GgmlType type, const Qwen35Scales& sc);

}  // namespace df::make_model
