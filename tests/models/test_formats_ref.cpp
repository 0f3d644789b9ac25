// Every quantised weight format against llama.cpp on a random-weight qwen3 model: the
// llama.cpp-made files (llama_model_quantize of one F32 model to each file type, with its own
// per-tensor type choices: Q3_K_M mixes Q3_K/Q4_K/Q5_K/Q6_K, the output matrix is mostly
// Q6_K, ...), and files written by df_make_model for the types llama.cpp's quantizer has no
// file type for on a dense model (MXFP4, NVFP4). For each, logits at every position of a few
// prompts (normalised error) and the teacher-forced argmax at every position.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "diskformer/engine.h"
#include "ref_harness.h"

namespace df {
namespace {

using reftest::normalised_error;

// Dimensions are multiples of 256 (K-quant super-blocks): dim 256, ff 768, head_dim 64.
const char* kShape = "--layers 2 --dim 256 --ff 768 --heads 4 --kv-heads 2 --head-dim 64 --untied --seed 31";

struct Case {
  std::string name;
  std::string llama_type;  // file type for llama_ref quantize, or empty
  std::string our_type;    // --type for df_make_model when llama_type is empty
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* t : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"})
    out.push_back({t, t, ""});
  out.push_back({"MXFP4", "", "mxfp4"});
  out.push_back({"NVFP4", "", "nvfp4"});
  return out;
}

const std::vector<std::string> kPrompts = {
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps again.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
};

// Normalised error budget of the logits and the share of positions whose argmax must agree.
constexpr double kMaxNerr = 1e-3;
constexpr double kMinArgmaxAgreement = 0.99;

class FormatsRef : public ::testing::TestWithParam<Case> {};

TEST_P(FormatsRef, LogitsMatchLlamaCpp) {
  const Case& c = GetParam();
  std::string model;
  if (!c.llama_type.empty()) {
    const std::string base = reftest::make_model("formats_base_f32", std::string(kShape) + " --type f32");
    model = reftest::work_dir() + "/formats_" + c.name + ".gguf";
    reftest::run(std::string(DF_LLAMA_REF) + " quantize -t 1 -m " + base + " -o " + model + " --type " +
                 c.llama_type + " 2>&1");
  } else {
    model = reftest::make_model("formats_" + c.name, std::string(kShape) + " --type " + c.our_type);
  }

  EngineOptions eo;
  eo.model_path = model;
  eo.cpu.threads = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 64;
  auto engine = Engine::load(eo);

  std::vector<std::vector<Token>> prompts;
  for (const auto& p : kPrompts) prompts.push_back(engine->tokenizer().encode(p, true));
  const std::string dir = reftest::work_dir();
  const std::string in = dir + "/formats_" + c.name + "_prompts.json";
  reftest::write_file(in, nlohmann::json(prompts).dump());
  const std::string bin = dir + "/formats_" + c.name + "_logits.bin";
  const auto meta = nlohmann::json::parse(reftest::run(std::string(DF_LLAMA_REF) + " logits -m " + model + " --in " +
                                                       in + " --out " + bin + " -c 256 --fa off"));
  const int64_t n_vocab = meta["n_vocab"];
  ASSERT_EQ(n_vocab, engine->info().n_vocab);
  const auto ref = reftest::read_floats(bin);

  size_t off = 0;
  int64_t positions = 0, agree = 0;
  double worst = 0;
  Session session(*engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto got = session.logits_all(prompts[i]);
    ASSERT_EQ(got.size(), prompts[i].size() * static_cast<size_t>(n_vocab));
    ASSERT_LE(off + got.size(), ref.size());
    const double e = normalised_error(ref.data() + off, got.data(), got.size());
    worst = std::max(worst, e);
    EXPECT_LE(e, kMaxNerr) << c.name << " prompt " << i;
    for (size_t p = 0; p < prompts[i].size(); ++p) {
      const float* r = ref.data() + off + p * n_vocab;
      const float* g = got.data() + p * n_vocab;
      agree += std::max_element(r, r + n_vocab) - r == std::max_element(g, g + n_vocab) - g;
      ++positions;
    }
    off += got.size();
  }
  EXPECT_EQ(off, ref.size());
  const double agreement = double(agree) / double(positions);
  EXPECT_GE(agreement, kMinArgmaxAgreement) << c.name << ": " << agree << " of " << positions;
  RecordProperty("worst_nerr", std::to_string(worst));
  RecordProperty("argmax_agreement", std::to_string(agreement));
  std::printf("[ formats ] %-7s worst nerr %.3g, argmax agreement %lld/%lld\n", c.name.c_str(), worst,
              static_cast<long long>(agree), static_cast<long long>(positions));
}

INSTANTIATE_TEST_SUITE_P(Models, FormatsRef, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace df
