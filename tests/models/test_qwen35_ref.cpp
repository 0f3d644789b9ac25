// Qwen3.5 hybrid (qwen35) against llama.cpp on random-weight models of several shapes (key
// heads fewer than value heads, rotary dims below the head size, 4 and 8 layers, with and
// without an MTP layer, rotary section layouts other than the released one) in F32, Q8_0 and
// a quantized mix: logits of every prompt position
// (normalised error) and 32 greedy tokens from 5 prompts, each through prefill chunk sizes
// 1, 7 and 64.
//
// Both sides keep the KV cache in F32 and llama.cpp runs without flash attention: its CPU
// flash attention accumulates the value rows in F16, an error (~5e-4 relative) that activation
// quantization then amplifies into differing greedy tokens on quantized models. With F32 caches
// the two implementations agree to float rounding, so the comparison tests the model recipe.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "diskformer/engine.h"
#include "qwen35_ref_check.h"
#include "ref_harness.h"

namespace df {
namespace {

using reftest::normalised_error;

struct Case {
  std::string name;
  std::string args;  // df_make_model flags
  double max_nerr;   // logits budget
  float tie_margin;  // greedy divergence excused below this llama.cpp top-2 logit margin
};

// A: 4 layers (3 DeltaNet + 1 attention), 2 key heads under 4 value heads, rotary 16 of 64.
// B: 8 layers, 1 key head under 3 value heads, one KV head, rotary 32 of 64, an MTP layer, tied.
// C: 4 layers, Qwen3.5's head sizes (delta-rule state 128, attention head 128), equal head
//    counts, full attention every 2nd layer, an MTP layer.
const char* kShapeA =
    "--arch qwen35 --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
    "--ssm-state 32 --ssm-k-heads 2 --ssm-v-heads 4 --untied";
const char* kShapeB =
    "--arch qwen35 --layers 8 --dim 256 --ff 512 --heads 4 --kv-heads 1 --head-dim 64 --rot-dims 32 "
    "--ssm-state 64 --ssm-k-heads 1 --ssm-v-heads 3 --mtp-layers 1 --tied";
const char* kShapeC =
    "--arch qwen35 --layers 4 --dim 256 --ff 768 --heads 2 --kv-heads 2 --head-dim 128 --rot-dims 32 "
    "--ssm-state 128 --ssm-k-heads 2 --ssm-v-heads 2 --full-attn-interval 2 --mtp-layers 1 --untied";
// D, E: rotary section layouts other than the released one (ggml IMROPE; for text sections
// 0..2 rotate with the position, section 3 and pairs past 3 * section with position 0):
// D [8, 8, 4, 4] over 24 pairs, E [3, 2, 1, 2] over 16 pairs (the sector wraps every 8 pairs).
const char* kShapeD =
    "--arch qwen35 --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 --rot-dims 48 "
    "--rope-sections 8,8,4,4 --ssm-state 32 --ssm-k-heads 2 --ssm-v-heads 4 --full-attn-interval 2 --untied";
const char* kShapeE =
    "--arch qwen35 --layers 2 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 --rot-dims 32 "
    "--rope-sections 3,2,1,2 --ssm-state 32 --ssm-k-heads 1 --ssm-v-heads 2 --full-attn-interval 2 --untied";
// A quantized mix: Q8_0 matrices with some tensors in F16, BF16 and F32.
const char* kMix =
    "--type q8_0 --mix token_embd=bf16,ffn_down=f16,ssm_out=f16,attn_gate=bf16,attn_v=f16,ssm_alpha=f32,ssm_beta=f32";

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::pair<std::string, const char*>> shapes = {{"a", kShapeA}, {"b", kShapeB}, {"c", kShapeC}};
  // Tie margins. F32: the two agree to ~1e-12 normalised error, 1e-3 is a true tie. Quantized:
  // each side rounds activations to the weight type's dot format, so last-bit differences
  // (ggml's SiLU is a polynomial exp, ours libm's expf; summation orders) flip roundings, and
  // the delta rule carries them forward in its state; on these random models (logit spread 4)
  // that moves logits by up to ~0.2 while the normalised error stays ~1e-4.
  int seed = 21;
  for (const auto& [sn, shape] : shapes) {
    const std::string s = " --seed " + std::to_string(seed);
    out.push_back({"qwen35_" + sn + "_f32", std::string(shape) + " --type f32" + s, 1e-4, 1e-3f});
    out.push_back({"qwen35_" + sn + "_q8_0", std::string(shape) + " --type q8_0" + s, 1e-3, 0.25f});
    out.push_back({"qwen35_" + sn + "_mix", std::string(shape) + " " + kMix + s, 1e-3, 0.25f});
    ++seed;
  }
  out.push_back({"qwen35_d_sections_f32", std::string(kShapeD) + " --type f32 --seed 41", 1e-4, 1e-3f});
  out.push_back({"qwen35_e_sections_f32", std::string(kShapeE) + " --type f32 --seed 42", 1e-4, 1e-3f});
  return out;
}

class Qwen35Ref : public ::testing::TestWithParam<Case> {};

TEST_P(Qwen35Ref, LogitsAndGreedyMatchLlamaCpp) {
  const Case& c = GetParam();
  reftest::check_hybrid_against_llama(reftest::make_model(c.name, c.args), {c.name, "qwen35", c.max_nerr, c.tie_margin});
}

INSTANTIATE_TEST_SUITE_P(Models, Qwen35Ref, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace df
