// Whole-model check of the IQ, ternary and 1/2-bit weight formats against llama.cpp: a
// random qwen3 model written by df_make_model (F32) is quantised by llama.cpp itself
// (llama_ref quantize --pure: every matrix, token_embd and output included, in the target
// type; an all-ones importance matrix for the types that require one), then our logits at
// every position of a few prompts are compared with llama.cpp's (flash attention off):
// normalised error and teacher-forced argmax agreement.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "diskformer/engine.h"
#include "ref_harness.h"

namespace df {
namespace {

// Dimensions are multiples of 256 so that every matrix takes the 256-element formats.
const char* kShape = "--layers 2 --dim 256 --ff 512 --heads 4 --kv-heads 1 --head-dim 64 --untied --type f32 --seed 21";

struct Case {
  const char* type;      // llama_ref quantize --type
  bool imatrix;          // llama.cpp refuses these without an importance matrix
};

const Case kCases[] = {
    {"IQ1_S", true},    {"IQ1_M", true},   {"IQ2_XXS", true}, {"IQ2_XS", true}, {"IQ2_S", true},
    {"IQ3_XXS", true},  {"IQ3_S", false},  {"IQ4_NL", false}, {"IQ4_XS", false},
    {"TQ1_0", false},   {"TQ2_0", false},  {"Q1_0", false},   {"Q2_0", false},
};

const std::vector<std::string> kPrompts = {
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
};

std::string base_model() { return reftest::make_model("iqfmt_f32", kShape); }

class FormatsIqRef : public ::testing::TestWithParam<Case> {};

TEST_P(FormatsIqRef, LogitsMatchLlamaCpp) {
  const Case& c = GetParam();
  const std::string dir = reftest::work_dir();
  const std::string model = dir + "/iqfmt_" + c.type + ".gguf";
  reftest::run(std::string(DF_LLAMA_REF) + " quantize -m " + base_model() + " -o " + model + " --type " + c.type +
               " --pure" + (c.imatrix ? " --imatrix-uniform" : "") + " 2>&1");

  EngineOptions eo;
  eo.model_path = model;
  eo.cpu.threads = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 64;
  auto engine = Engine::load(eo);

  std::vector<std::vector<Token>> prompts;
  for (const auto& p : kPrompts) prompts.push_back(engine->tokenizer().encode(p, true));
  const std::string in = dir + "/iqfmt_" + c.type + "_prompts.json";
  reftest::write_file(in, nlohmann::json(prompts).dump());
  const std::string bin = dir + "/iqfmt_" + c.type + "_logits.bin";
  const auto meta = nlohmann::json::parse(reftest::run(std::string(DF_LLAMA_REF) + " logits -m " + model + " --in " +
                                                       in + " --out " + bin + " -c 256 --fa off"));
  const int64_t n_vocab = meta["n_vocab"];
  ASSERT_EQ(n_vocab, engine->info().n_vocab);
  const auto ref = reftest::read_floats(bin);

  // Logits at every position, and the teacher-forced argmax at every position.
  size_t off = 0;
  int64_t positions = 0, agree = 0;
  Session session(*engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto got = session.logits_all(prompts[i]);
    ASSERT_LE(off + got.size(), ref.size());
    const double e = reftest::normalised_error(ref.data() + off, got.data(), got.size());
    RecordProperty(std::string("nerr_prompt") + std::to_string(i), std::to_string(e));
    EXPECT_LE(e, 1e-3) << c.type << " prompt " << i;
    for (size_t p = 0; p < got.size(); p += n_vocab) {
      const float* r = ref.data() + off + p;
      const float* g = got.data() + p;
      agree += std::max_element(r, r + n_vocab) - r == std::max_element(g, g + n_vocab) - g;
      ++positions;
    }
    off += got.size();
  }
  EXPECT_EQ(off, ref.size());
  // Teacher-forced argmax agreement. Not 99%: both sides compute the same quantised
  // products but sum f32 in different orders (llama.cpp's prefill of the grid IQ types even
  // runs a different gemm, iqp.cpp), so somewhere in a prompt a last-bit difference crosses
  // an activation (Q8_K / F16 KV) rounding boundary; in these 1.5-2 bit random models that
  // one flip moves all later logits by ~1e-4 (normalised) and swaps near-tied argmaxes
  // (top-2 margins of 0.01-0.3 on logits of rms ~4). Our own engine shows the same effect
  // against itself (scalar vs AVX-512 kernels, TQ2_0: 2.2e-5). Measured agreement on this
  // model: 95-100% per type; the bound catches a systematically wrong kernel.
  RecordProperty("argmax_agreement", std::to_string(double(agree) / positions));
  std::printf("%s: teacher-forced argmax agrees at %ld of %ld positions\n", c.type, long(agree), long(positions));
  EXPECT_GE(agree * 100, positions * 90) << c.type << ": teacher-forced argmax agrees at " << agree << " of "
                                         << positions << " positions";
}

INSTANTIATE_TEST_SUITE_P(Types, FormatsIqRef, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace df
