// Qwen3.5 MoE (qwen35moe) against llama.cpp on random-weight models of two shapes (both with
// key heads fewer than value heads; B adds a tied output, rotary dims below the head size,
// attention every 2nd layer and an MTP layer whose MoE is loaded and checked) in F32, Q8_0 and
// a K-quant mix made by llama.cpp's own quantizer (llama_ref quantize Q4_K_M): logits of every
// prompt position (normalised error) and 32 greedy tokens from 5 prompts, each through prefill
// chunk sizes 1, 7 and 64 (decode, a few tokens per expert, many tokens per expert).
//
// Budgets are the dense qwen35 tests' (tests/models/test_qwen35_ref.cpp), and so is the set-up:
// F32 KV caches on both sides, llama.cpp without flash attention.
// The router adds one failure mode the dense models lack: where two experts' probabilities are
// within rounding of each other at the top-k boundary, the two implementations may choose
// different experts. That is a near-tie of the router, not an error; on these shapes it does not
// occur for the F32 models (checked: the F32 errors stay at float rounding) and the quantized
// budgets hold with it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "qwen35_ref_check.h"
#include "ref_harness.h"

namespace df {
namespace {

using reftest::normalised_error;

struct Case {
  std::string name;
  std::string args;      // df_make_model flags
  std::string quantize;  // llama_ref quantize --type applied to the generated model ("" none)
  double max_nerr;       // logits budget
  float tie_margin;      // greedy divergence excused below this llama.cpp top-2 logit margin
  bool cpu_repack = true;  // the engine's load-time repacked weights (both ways for Q4_K_M)
};

// A: 4 layers (3 DeltaNet + 1 attention), 2 key heads under 4 value heads, 8 experts, 2 used.
// B: 4 layers (attention every 2nd), 1 key head under 3 value heads, one KV head, rotary 32 of
//    64, 16 experts, 4 used, tied output, an MTP layer (MoE too).
const char* kShapeA =
    "--arch qwen35moe --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
    "--ssm-state 32 --ssm-k-heads 2 --ssm-v-heads 4 --experts 8 --experts-used 2 --expert-ff 128 "
    "--shexp-ff 256 --untied";
const char* kShapeB =
    "--arch qwen35moe --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 1 --head-dim 64 --rot-dims 32 "
    "--ssm-state 64 --ssm-k-heads 1 --ssm-v-heads 3 --full-attn-interval 2 --experts 16 --experts-used 4 "
    "--expert-ff 64 --shexp-ff 128 --mtp-layers 1 --tied";

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::vector<std::pair<std::string, const char*>> shapes = {{"a", kShapeA}, {"b", kShapeB}};
  int seed = 31;
  for (const auto& [sn, shape] : shapes) {
    const std::string s = " --seed " + std::to_string(seed++);
    out.push_back({"qwen35moe_" + sn + "_f32", std::string(shape) + " --type f32" + s, "", 1e-4, 1e-3f});
    out.push_back({"qwen35moe_" + sn + "_q8_0", std::string(shape) + " --type q8_0" + s, "", 1e-3, 0.25f});
  }
  out.push_back({"qwen35moe_a_q4_k_m", std::string(kShapeA) + " --type f32 --seed 31", "Q4_K_M", 1e-3, 0.25f});
  out.push_back({"qwen35moe_a_q4_k_m_norepack", std::string(kShapeA) + " --type f32 --seed 31", "Q4_K_M", 1e-3, 0.25f,
                 false});
  return out;
}

class Qwen35MoeRef : public ::testing::TestWithParam<Case> {};

TEST_P(Qwen35MoeRef, LogitsAndGreedyMatchLlamaCpp) {
  const Case& c = GetParam();
  const std::string dir = reftest::work_dir();
  std::string model = reftest::make_model(c.quantize.empty() ? c.name : c.name + "_base", c.args);
  if (!c.quantize.empty()) {
    const std::string q = dir + "/" + c.name + ".gguf";
    reftest::run(std::string(DF_LLAMA_REF) + " quantize -m " + model + " -o " + q + " --type " + c.quantize);
    model = q;
  }

  reftest::check_hybrid_against_llama(model, {c.name, "qwen35moe", c.max_nerr, c.tie_margin, c.cpu_repack});
}

// A file whose MoE tensors do not match its keys is a clear error naming the tensor: a missing
// expert stack, and an expert_count that disagrees with the stacks' shapes.
TEST(Qwen35MoeLoad, MismatchedExpertTensorsAreClearErrors) {
  const std::string base = reftest::make_model(
      "qwen35moe_load",
      "--arch qwen35moe --layers 1 --full-attn-interval 1 --dim 64 --ff 128 --heads 2 --kv-heads 1 --head-dim 32 "
      "--experts 8 --experts-used 2 --type f32");
  auto f = gguf::File::open(base);
  auto rewrite = [&](const std::string& out, const std::string& drop, uint32_t experts) {
    gguf::Writer w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    if (experts) w.set_u32("qwen35moe.expert_count", experts);
    for (const auto& t : f->tensors())
      if (t.name != drop) w.add_tensor(t.name, t.type, t.ne, f->tensor_data(t), t.nbytes);
    w.write(out);
    return out;
  };
  const std::string dir = reftest::work_dir();
  cpu::CpuBackend backend(cpu::CpuOptions{1, cpu::Isa::SCALAR});
  auto expect_error = [&](const std::string& path, const std::string& needle) {
    auto g = gguf::File::open(path);
    try {
      load_model(*g, backend);
      ADD_FAILURE() << path << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(rewrite(dir + "/qwen35moe_no_up.gguf", "blk.0.ffn_up_exps.weight", 0), "blk.0.ffn_up_exps.weight");
  expect_error(rewrite(dir + "/qwen35moe_e7.gguf", "", 7), "ffn_gate_inp.weight");
  auto ok = gguf::File::open(base);
  EXPECT_EQ(load_model(*ok, backend)->info().n_expert, 8);
}

INSTANTIATE_TEST_SUITE_P(Models, Qwen35MoeRef, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace df
