// The shipped default model (models/default.gguf, trained by tools/train) against llama.cpp:
// greedy continuations of Python prompts token for token, and perplexity on the held-out
// split (first windows; the README records the whole file).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

#include "diskformer/engine.h"
#include "ref_harness.h"

namespace df {
namespace {

const std::string kModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";

TEST(DefaultModelRef, GreedyPythonMatchesLlamaCpp) {
  EngineOptions eo;
  eo.model_path = kModel;
  eo.cpu.threads = 2;
  eo.n_ctx = 512;
  auto engine = Engine::load(eo);
  ASSERT_EQ(engine->info().arch, "qwen35");
  const std::vector<std::string> texts = {
      "def fibonacci(n):\n",
      "import os\n",
      "class Stack:\n    def __init__(self):\n",
      "for i in range(10):\n",
      "def read_json(path):\n    with open(path) as f:\n",
  };
  std::vector<std::vector<Token>> prompts;
  for (const auto& t : texts) prompts.push_back(engine->tokenizer().encode(t, true));
  const std::string dir = reftest::work_dir();
  reftest::write_file(dir + "/default_prompts.json", nlohmann::json(prompts).dump());
  reftest::run(std::string(DF_LLAMA_REF) + " generate -m " + kModel + " --in " + dir +
               "/default_prompts.json -n 32 --out " + dir + "/default_gen.json -c 512 --fa off");
  const auto g = nlohmann::json::parse(reftest::read_file(dir + "/default_gen.json"));
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions go;
    go.max_new_tokens = 32;
    go.stop_at_eog = false;
    Session s(*engine);
    const auto ours = s.generate(prompts[i], go, nullptr);
    EXPECT_EQ(ours, g["tokens"][i].get<std::vector<Token>>()) << "prompt " << i << ": " << texts[i];
  }
}

TEST(DefaultModelRef, HeldOutPerplexityWithinOnePercent) {
  const std::string text = std::string(DF_SOURCE_DIR) + "/models/heldout.txt";
  const std::string ours = reftest::run(std::string(DF_CLI) + " perplexity -q -t 2 -m " + kModel + " -f " + text +
                                        " -c 512 --chunks 4 2>/dev/null");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(ours, m, std::regex("PPL = ([0-9.]+)"))) << ours;
  const double ppl_ours = std::stod(m[1]);
  const auto theirs = nlohmann::json::parse(
      reftest::run(std::string(DF_LLAMA_REF) + " perplexity -m " + kModel + " -f " + text + " -c 512 --chunks 4 --fa off"));
  const double ppl_llama = theirs["ppl"];
  std::printf("held-out perplexity (4 windows of 512): diskformer %.4f, llama.cpp %.4f\n", ppl_ours, ppl_llama);
  EXPECT_LT(std::fabs(ppl_ours - ppl_llama) / ppl_llama, 0.01);
}

}  // namespace
}  // namespace df
