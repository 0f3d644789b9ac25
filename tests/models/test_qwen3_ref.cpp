// Qwen3 against llama.cpp on random-weight models of several shapes and weight types:
// logits of every prompt position (normalised error) and 32 greedy tokens from 5 prompts.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "diskformer/engine.h"
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

// Shapes: head dim 64 and 128, one and several KV heads, tied and untied output.
const char* kShapeA = "--layers 3 --dim 256 --ff 512 --heads 4 --kv-heads 1 --head-dim 64 --tied";
const char* kShapeB = "--layers 2 --dim 256 --ff 640 --heads 4 --kv-heads 2 --head-dim 128 --untied";

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const char* type : {"f32", "f16", "bf16", "q8_0"}) {
    // Quantized activations flip on last-bit differences more often than F16/BF16 ones, and
    // on these random models one flipped Q8 value moves logits by up to ~0.1.
    const bool q8 = std::string(type) == "q8_0";
    const double budget = q8 ? 1e-3 : 1e-4;
    const float margin = q8 ? 0.1f : 0.02f;
    out.push_back({std::string("qwen3_a_") + type, std::string(kShapeA) + " --type " + type + " --seed 11", budget, margin});
    out.push_back({std::string("qwen3_b_") + type, std::string(kShapeB) + " --type " + type + " --seed 12", budget, margin});
  }
  return out;
}

const std::vector<std::string> kPrompts = {
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "import os\nimport sys\n\nfor path in sys.argv[1:]:\n    print(os.path.basename(path))",
    "Numbers 12345 and 67.89, symbols #@!, and unicode: caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac",
};

class Qwen3Ref : public ::testing::TestWithParam<Case> {};

TEST_P(Qwen3Ref, LogitsAndGreedyMatchLlamaCpp) {
  const Case& c = GetParam();
  const std::string model = reftest::make_model(c.name, c.args);
  EngineOptions eo;
  eo.model_path = model;
  eo.cpu.threads = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 64;
  auto engine = Engine::load(eo);

  std::vector<std::vector<Token>> prompts;
  for (const auto& p : kPrompts) prompts.push_back(engine->tokenizer().encode(p, true));
  const std::string dir = reftest::work_dir();
  const std::string in = dir + "/" + c.name + "_prompts.json";
  reftest::write_file(in, nlohmann::json(prompts).dump());

  // 1. logits at every position. llama.cpp runs with flash attention off: its CPU flash
  //    attention accumulates the V products in F16, while its plain path rounds Q and the
  //    probabilities to F16 and accumulates in F32, as we do.
  const std::string bin = dir + "/" + c.name + "_logits.bin";
  const auto meta = nlohmann::json::parse(
      reftest::run(std::string(DF_LLAMA_REF) + " logits -m " + model + " --in " + in + " --out " + bin + " -c 256 --fa off"));
  const int64_t n_vocab = meta["n_vocab"];
  ASSERT_EQ(n_vocab, engine->info().n_vocab);
  const auto ref = reftest::read_floats(bin);
  size_t off = 0;
  Session session(*engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto got = session.logits_all(prompts[i]);
    ASSERT_LE(off + got.size(), ref.size());
    const double e = normalised_error(ref.data() + off, got.data(), got.size());
    EXPECT_LE(e, c.max_nerr) << c.name << " prompt " << i;
    off += got.size();
  }
  EXPECT_EQ(off, ref.size());

  // 2. greedy generation, token for token. Prefill logits agree to the last bits (above),
  //    but decode steps and later activation roundings (F16/BF16 activations, Q8 blocks) can
  //    still flip where f32 summation order differs, so a divergence is excused only where
  //    llama.cpp's own top two logits are within c.tie_margin; the rest of that prompt is
  //    then not compared. Excused divergences are counted and reported, and at least half of
  //    all generated tokens must have been compared.
  const std::string gen = dir + "/" + c.name + "_gen.json";
  reftest::run(std::string(DF_LLAMA_REF) + " generate -m " + model + " --in " + in + " -n 32 --out " + gen + " -c 256 --fa off");
  const auto g = nlohmann::json::parse(reftest::read_file(gen));
  int excused = 0;
  size_t compared = 0, total = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions go;
    go.max_new_tokens = 32;
    go.stop_at_eog = false;
    Session s(*engine);
    const auto ours = s.generate(prompts[i], go, nullptr);
    const auto theirs = g["tokens"][i].get<std::vector<Token>>();
    const auto margins = g["margins"][i].get<std::vector<float>>();
    ASSERT_EQ(ours.size(), theirs.size());
    total += ours.size();
    for (size_t t = 0; t < ours.size(); ++t) {
      if (ours[t] == theirs[t]) {
        ++compared;
        continue;
      }
      if (margins[t] < c.tie_margin) {
        ++excused;
        std::printf("[ excused  ] %s prompt %zu token %zu: llama.cpp margin %.4f < %.3f\n", c.name.c_str(), i, t,
                    margins[t], c.tie_margin);
        break;
      }
      ADD_FAILURE() << c.name << " prompt " << i << " differs at generated token " << t << ": ours " << ours[t]
                    << ", llama.cpp " << theirs[t] << " (llama.cpp margin " << margins[t] << ")";
      break;
    }
  }
  RecordProperty("excused_near_ties", excused);
  RecordProperty("tokens_compared", static_cast<int>(compared));
  EXPECT_GE(compared * 2, total) << "fewer than half of the generated tokens were compared";
}

INSTANTIATE_TEST_SUITE_P(Models, Qwen3Ref, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace df
