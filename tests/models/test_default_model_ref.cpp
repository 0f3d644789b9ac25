// The shipped default model (models/default.gguf, trained by tools/train) against llama.cpp:
// greedy continuations of Python prompts token for token, and perplexity on the held-out
// split: the first windows within 1 % of llama.cpp, and the whole file against the figures the
// README states (diskformer's and llama.cpp's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "quant/cpu/kernels.h"
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

// The README's table states the whole-file perplexity of models/heldout.txt at ctx 512, for
// diskformer ("3.7394 (PPL = 3.739427)") and for llama.cpp ("3.7392"). Both are recomputed
// here and must round to the stated digits, so the README cannot drift from what the code does.
TEST(DefaultModelRef, ReadmeHeldOutPerplexityFigures) {
  std::ifstream readme(std::string(DF_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << readme.rdbuf();
  const std::string md = ss.str();
  std::smatch ours_row, llama_row;
  ASSERT_TRUE(std::regex_search(md, ours_row,
                                std::regex(R"(\| `models/heldout\.txt`, ctx 512, `diskformer perplexity` \| ([0-9.]+) \(PPL = ([0-9.]+)\) \|)")))
      << "README.md: no held-out perplexity row for diskformer";
  ASSERT_TRUE(std::regex_search(md, llama_row, std::regex(R"(\| same text, llama\.cpp \(`llama_ref perplexity`\) \| ([0-9.]+) \|)")))
      << "README.md: no held-out perplexity row for llama.cpp";
  const double readme_ours4 = std::stod(ours_row[1]), readme_ours6 = std::stod(ours_row[2]);
  const double readme_llama4 = std::stod(llama_row[1]);

  const std::string text = std::string(DF_SOURCE_DIR) + "/models/heldout.txt";
  const std::string out = reftest::run(std::string(DF_CLI) + " perplexity -q -t 2 -m " + kModel + " -f " + text +
                                       " -c 512 2>/dev/null");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("PPL = ([0-9.]+)"))) << out;
  const double ours = std::stod(m[1]);
  const auto theirs = nlohmann::json::parse(
      reftest::run(std::string(DF_LLAMA_REF) + " perplexity -m " + kModel + " -f " + text + " -c 512 --fa off"));
  const double llama = theirs["ppl"];
  std::printf("whole held-out file, ctx 512: diskformer %.6f (README %.6f), llama.cpp %.6f (README %.4f)\n", ours,
              readme_ours6, llama, readme_llama4);
  // Printed to 6 and 4 decimals: equal up to the rounding of the last digit shown, plus 2e-5
  // for the CPU's instruction set (kernels per ISA sum in different orders: AVX2 gives
  // 3.739431 where AVX-512 gives 3.739427).
  EXPECT_LE(std::fabs(ours - readme_ours6), 2e-5);
  EXPECT_LE(std::fabs(ours - readme_ours4), 5e-5 + 2e-5);
  // llama.cpp's figure: the README's is of its AVX-512 build; another CPU loads another build
  // of its kernels (an AVX2-only one gave 3.738988), which the README states apart
  if (cpu::best_isa() == cpu::Isa::AVX512) {
    EXPECT_LE(std::fabs(llama - readme_llama4), 5e-5 + 2e-5);
  } else {
    std::printf("llama.cpp's figure not held to the README's (measured with AVX-512; this CPU: %s)\n",
                std::string(cpu::isa_name(cpu::best_isa())).c_str());
  }
}

}  // namespace
}  // namespace df
