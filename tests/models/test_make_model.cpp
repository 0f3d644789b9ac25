// df_make_model's output as llama.cpp sees it: the trained tokenizer works in llama.cpp's BPE,
// and the logits have the spread the generator promises (not near-ties everywhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "quant/types.h"
#include "ref_harness.h"

namespace df {
namespace {

std::string hex(const std::string& bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

const std::string kCorpus = std::string(DF_SOURCE_DIR) + "/tools/make_model/vocab_corpus.txt";

// The merges only help if llama.cpp's BPE understands them: with unusable merges it falls back
// to one token per byte. Trained on this corpus, the vocabulary must compress it well, and the
// special tokens must be single tokens.
TEST(MakeModel, TrainedVocabularyWorksInLlamaCpp) {
  const std::string model = reftest::make_model("mm_vocab", "--layers 1 --type f32 --seed 1");
  const std::string text = reftest::read_file(kCorpus);
  ASSERT_GT(text.size(), 4000u);
  const std::string dir = reftest::work_dir();
  reftest::write_file(dir + "/mm_vocab_in.json",
                      nlohmann::json({hex(text), hex("<|im_start|>\n<|im_end|><think></think>")}).dump());
  reftest::run(std::string(DF_LLAMA_REF) + " tokenize -m " + model + " --in " + dir + "/mm_vocab_in.json --out " +
               dir + "/mm_vocab_out.json");
  const auto out = nlohmann::json::parse(reftest::read_file(dir + "/mm_vocab_out.json"));
  const auto ids = out[0].get<std::vector<int>>();
  const double bytes_per_token = static_cast<double>(text.size()) / static_cast<double>(ids.size());
  EXPECT_GT(bytes_per_token, 2.5) << ids.size() << " tokens for " << text.size() << " bytes";

  auto f = gguf::File::open(model);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 1024u);
  // The corpus supports enough merges that the default vocabulary needs no [PAD] fillers.
  EXPECT_EQ(tokens.back(), "</think>");
  const auto specials = out[1].get<std::vector<int>>();
  auto id_of = [&](const std::string& t) {
    return static_cast<int>(std::find(tokens.begin(), tokens.end(), t) - tokens.begin());
  };
  ASSERT_EQ(specials.size(), 5u);
  EXPECT_EQ(specials[0], id_of("<|im_start|>"));
  EXPECT_EQ(specials[1], id_of("\xc4\x8a"));  // "\n" in GPT-2's byte-to-unicode form (U+010A)
  EXPECT_EQ(specials[2], id_of("<|im_end|>"));
  EXPECT_EQ(specials[3], id_of("<think>"));
  EXPECT_EQ(specials[4], id_of("</think>"));
}

// The generator targets logits with a standard deviation of about 4 per position, and greedy
// decisions that are mostly clear: few positions with llama.cpp's top-two gap under 1e-2.
TEST(MakeModel, LogitsHaveHealthySpread) {
  for (const char* type : {"f32", "q8_0"}) {
    const std::string model = reftest::make_model(std::string("mm_spread_") + type, std::string("--type ") + type);
    const std::string dir = reftest::work_dir();
    std::vector<std::vector<int>> prompts = {{1, 2, 3, 4, 5, 6, 7, 8}, {100, 200, 300, 400, 500, 600, 700}};
    std::vector<int> longer;
    for (int i = 0; i < 64; ++i) longer.push_back((i * 37 + 11) % 1019);
    prompts.push_back(longer);
    const std::string in = dir + "/mm_spread_in.json", bin = dir + "/mm_spread.bin";
    reftest::write_file(in, nlohmann::json(prompts).dump());
    const auto meta = nlohmann::json::parse(
        reftest::run(std::string(DF_LLAMA_REF) + " logits -m " + model + " --in " + in + " --out " + bin));
    const int64_t n_vocab = meta["n_vocab"];
    const auto logits = reftest::read_floats(bin);
    const size_t rows = logits.size() / static_cast<size_t>(n_vocab);
    ASSERT_EQ(rows, 8u + 7u + 64u);
    int near_ties = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * static_cast<size_t>(n_vocab);
      double mean = 0, sq = 0;
      for (int64_t v = 0; v < n_vocab; ++v) mean += row[v];
      mean /= static_cast<double>(n_vocab);
      for (int64_t v = 0; v < n_vocab; ++v) sq += (row[v] - mean) * (row[v] - mean);
      const double sd = std::sqrt(sq / static_cast<double>(n_vocab));
      EXPECT_GT(sd, 2.0) << type << " row " << r;
      EXPECT_LT(sd, 8.0) << type << " row " << r;
      std::vector<float> sorted(row, row + n_vocab);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] < 1e-2f) ++near_ties;
    }
    EXPECT_LE(near_ties, static_cast<int>(rows / 20)) << type;
  }
}

// Random models must not fall into one-token loops under greedy decoding (a tied output used to
// make every token vote for itself), or greedy tests compare nothing.
TEST(MakeModel, GreedyGenerationIsNotDegenerate) {
  for (const char* tie : {"--tied", "--untied"}) {
    const std::string name = std::string("mm_greedy") + (tie[2] == 't' ? "_tied" : "_untied");
    const std::string model = reftest::make_model(name, std::string("--layers 3 --seed 3 ") + tie);
    const std::string dir = reftest::work_dir();
    const std::vector<std::vector<int>> prompts = {{1, 2, 3, 4, 5}, {500, 20, 7}, {900, 901, 902, 903}};
    reftest::write_file(dir + "/" + name + "_in.json", nlohmann::json(prompts).dump());
    reftest::run(std::string(DF_LLAMA_REF) + " generate -m " + model + " --in " + dir + "/" + name +
                 "_in.json -n 32 --out " + dir + "/" + name + "_gen.json");
    const auto g = nlohmann::json::parse(reftest::read_file(dir + "/" + name + "_gen.json"));
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto ids = g["tokens"][i].get<std::vector<int>>();
      ASSERT_EQ(ids.size(), 32u);
      std::sort(ids.begin(), ids.end());
      const auto distinct = std::unique(ids.begin(), ids.end()) - ids.begin();
      EXPECT_GE(distinct, 8) << tie << " prompt " << i;
    }
  }
}

}  // namespace
}  // namespace df
