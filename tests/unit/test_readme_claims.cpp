// README claims about the CLI that no other test checks, each driving the built binary on the
// default model (a unit test: no llama.cpp, also under the sanitizers):
//   - `tokenize` prints the ids as JSON and parses special tokens (`--no-special` does not);
//   - `logits -o FILE` writes float32 [n_tokens, n_vocab], whose last row's argmax is the
//     greedy next token of `run --temp 0`;
//   - `--isa auto|scalar|avx2|avx512` picks the CPU kernels (the backend `bench` reports; an
//     ISA this CPU lacks is a clear error) and every ISA computes the same logits;
//   - `--kv-f32` changes the KV cache's type (the logits move by F16 rounding, no more);
//   - `--seed` makes sampling (`--temp 0.7 --top-p 0.9`) reproducible, and other seeds differ;
//   - speculative decoding (`--spec mtp|draft-mtp|none`, `--spec-type`, `--draft-max`,
//     `--spec-draft-n-max`) gives the tokens of plain greedy decoding, and `--output json`
//     reports `stats.spec` with one acceptance figure per draft position;
//     `bench --spec mtp --draft-accept P` measures plain beside speculative generation;
//   - `--decode-lookahead` keeps the greedy tokens (`bench` reports `decode_lookahead`);
//   - `inspect` lists the metadata, the hyperparameters and every tensor;
//   - `--top-k`, `--top-p`, `--min-p` reach the sampler (each can turn hot sampling greedy).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "quant/cpu/kernels.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace df {
namespace {

using nlohmann::json;

const std::string kCli = DF_CLI;
const std::string kModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";
const std::string kPrompt = "'def fibonacci(n):\n    if n < 2:\n        return n\n'";

// `diskformer ARGS` on the default model: exit status and stdout (stderr dropped unless asked).
testutil::CommandResult cli(const std::string& args) {
  return testutil::run_status(kCli + " " + args + " </dev/null");
}

// `--output json`: the JSON on stdout (on failure, the command's messages are shown).
json cli_json(const std::string& args) {
  const auto r = cli(args + " --output json 2>/dev/null");
  if (r.rc != 0) ADD_FAILURE() << args << ": exit " << r.rc << "\n" << cli(args + " --output json 2>&1").out;
  return json::parse(r.out, nullptr, false);
}

std::vector<float> floats_of(const std::string& bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

double nerr(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (static_cast<double>(ref[i]) - got[i]) * (static_cast<double>(ref[i]) - got[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return num / den;
}

class ReadmeCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    file_ = gguf::File::open(kModel).release();
    tok_ = Tokenizer::from_gguf(*file_).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete file_;
  }
  // `logits` of the prompt into a file; returns the floats.
  std::vector<float> logits(const std::string& flags) {
    const std::string out = testutil::test_dir(DF_UNIT_WORK_DIR) + "/readme_logits.f32";
    const auto r = cli("logits -q -t 1 -p " + kPrompt + " -o " + out + " " + flags + " 2>&1");
    EXPECT_EQ(r.rc, 0) << flags << "\n" << r.out;
    return floats_of(testutil::read_file(out));
  }
  static gguf::File* file_;
  static Tokenizer* tok_;
};
gguf::File* ReadmeCli::file_ = nullptr;
Tokenizer* ReadmeCli::tok_ = nullptr;

TEST_F(ReadmeCli, TokenizePrintsJsonIdsAndParsesSpecialTokens) {
  const std::string text = "Hello <|im_start|>";
  const auto special = json::parse(cli("tokenize -m " + kModel + " -p '" + text + "'").out);
  const auto plain = json::parse(cli("tokenize --no-special -m " + kModel + " -p '" + text + "'").out);
  EXPECT_EQ(special.get<std::vector<Token>>(), tok_->encode(text, true));
  EXPECT_EQ(plain.get<std::vector<Token>>(), tok_->encode(text, false));
  const std::vector<Token> marker = tok_->encode("<|im_start|>", true);
  ASSERT_EQ(marker.size(), 1u);  // one special token
  EXPECT_EQ(special.back(), marker[0]);
  EXPECT_GT(plain.size(), special.size());  // spelled out byte-level
}

TEST_F(ReadmeCli, LogitsFileIsTokensByVocabFloat32) {
  const auto ids = json::parse(cli("tokenize -m " + kModel + " -p " + kPrompt).out);
  const std::vector<float> l = logits("");
  const size_t n_tokens = ids.size(), n_vocab = static_cast<size_t>(tok_->n_vocab());
  ASSERT_EQ(l.size(), n_tokens * n_vocab);
  for (float x : l) ASSERT_TRUE(std::isfinite(x));
  const float* last = l.data() + (n_tokens - 1) * n_vocab;
  const auto best = static_cast<Token>(std::max_element(last, last + n_vocab) - last);
  const json run = cli_json("run -q -t 1 -p " + kPrompt + " -n 1 --temp 0 --spec none");
  EXPECT_EQ(run["prompt_tokens"], ids);
  ASSERT_EQ(run["tokens"].size(), 1u);
  EXPECT_EQ(run["tokens"][0], best);
}

TEST_F(ReadmeCli, IsaPicksTheKernelsAndAllAgree) {
  const cpu::Isa best = cpu::best_isa();
  const std::string best_name(cpu::isa_name(best));
  const std::vector<float> ref = logits("--isa scalar");
  for (const cpu::Isa isa : {cpu::Isa::SCALAR, cpu::Isa::AVX2, cpu::Isa::AVX512}) {
    const std::string name(cpu::isa_name(isa));
    const std::string bench = "bench -q -t 1 -p 4 -n 2 -r 1 --isa " + name;
    if (static_cast<int>(isa) > static_cast<int>(best)) {
      const auto r = cli(bench + " 2>&1");
      EXPECT_EQ(r.rc, 1) << r.out;
      EXPECT_NE(r.out.find("this CPU does not support --isa " + name), std::string::npos) << r.out;
      continue;
    }
    const json j = cli_json(bench);
    EXPECT_EQ(j["backend"].get<std::string>().rfind("cpu (" + name + ", 1 threads)", 0), 0u) << j.dump();
    EXPECT_EQ(j["n_prompt"], 4);
    EXPECT_EQ(j["n_gen"], 2);
    EXPECT_GT(j["prefill_tokens_per_second"].get<double>(), 0);
    EXPECT_GT(j["decode_tokens_per_second"].get<double>(), 0);
    const std::vector<float> got = logits("--isa " + name);
    ASSERT_EQ(got.size(), ref.size());
    // The ISAs sum in different orders (measured: 1.7e-5 for avx2 and avx512 vs scalar over
    // 16 positions); a wrong kernel would be off by order 1.
    EXPECT_LT(nerr(ref, got), 1e-4) << name << " vs scalar";
  }
  const json a = cli_json("bench -q -t 1 -p 4 -n 2 -r 1 --isa auto");
  EXPECT_EQ(a["backend"].get<std::string>().rfind("cpu (" + best_name + ",", 0), 0u) << a.dump();
}

// The default model has two full-attention layers: an F16 cache rounds their K and V, an F32
// one does not, so the logits differ (slightly) exactly when the flag takes effect.
TEST_F(ReadmeCli, KvF32ChangesTheCacheType) {
  const std::vector<float> f16 = logits(""), f32 = logits("--kv-f32");
  ASSERT_EQ(f16.size(), f32.size());
  EXPECT_NE(f16, f32) << "--kv-f32 gave the F16 cache's logits bit for bit";
  EXPECT_LT(nerr(f32, f16), 1e-4);
}

TEST_F(ReadmeCli, SeedMakesSamplingReproducible) {
  const std::string args = "run -q -t 1 -p " + kPrompt + " -n 12 --temp 0.7 --top-p 0.9 --seed ";
  const json a = cli_json(args + "1"), b = cli_json(args + "1");
  EXPECT_EQ(a["tokens"], b["tokens"]);
  std::set<std::string> outs = {a["tokens"].dump()};
  for (int seed = 2; seed <= 4; ++seed) outs.insert(cli_json(args + std::to_string(seed))["tokens"].dump());
  EXPECT_GT(outs.size(), 1u) << "four seeds sampled the same 12 tokens";
}

// README: "Flags follow llama.cpp's spelling: ... --temp --top-k --top-p --min-p --seed". Each
// truncation flag, set to keep only the most likely token, turns hot sampling (--temp 1.5)
// into greedy decoding, for every seed; without them those seeds do not all decode greedily
// (so a flag that did not reach the sampler would fail here).
TEST_F(ReadmeCli, TruncationFlagsReachTheSampler) {
  const std::string base = "run -q -t 1 -p " + kPrompt + " -n 16 ";
  const json greedy = cli_json(base + "--temp 0 --spec none")["tokens"];
  ASSERT_EQ(greedy.size(), 16u);
  int hot_greedy = 0;
  for (int seed = 1; seed <= 3; ++seed) {
    // Hot, with every truncation off but the one under test.
    const auto hot = [&](const std::string& k, const std::string& p, const std::string& m) {
      return cli_json(base + "--temp 1.5 --seed " + std::to_string(seed) + " --top-k " + k + " --top-p " + p +
                      " --min-p " + m)["tokens"];
    };
    if (hot("0", "1", "0") == greedy) ++hot_greedy;
    EXPECT_EQ(hot("1", "1", "0"), greedy) << "--top-k 1 --seed " << seed;
    EXPECT_EQ(hot("0", "0.000001", "0"), greedy) << "--top-p 0.000001 --seed " << seed;
    EXPECT_EQ(hot("0", "1", "1"), greedy) << "--min-p 1 --seed " << seed;
  }
  EXPECT_LT(hot_greedy, 3) << "--temp 1.5 decoded greedily for every seed: the check above proves nothing";
}

// README: "`--decode-lookahead off|auto|on` ... the same tokens"; and `bench` says which ran.
TEST_F(ReadmeCli, DecodeLookaheadKeepsTheGreedyTokens) {
  const std::string base = "run -q -t 1 -p " + kPrompt + " -n 24 --temp 0 --spec none ";
  const json plain = cli_json(base + "--decode-lookahead off");
  ASSERT_EQ(plain["tokens"].size(), 24u);
  for (const char* mode : {"on", "auto"})
    EXPECT_EQ(cli_json(base + "--decode-lookahead " + mode)["tokens"], plain["tokens"]) << mode;
  const std::string bench = "bench -q --device cpu -t 1 -p 4 -n 8 -r 1 --decode-lookahead ";
  EXPECT_TRUE(cli_json(bench + "on")["decode_lookahead"].get<bool>());
  EXPECT_FALSE(cli_json(bench + "auto")["decode_lookahead"].get<bool>());  // the CPU backend runs each op at once
  const auto r = cli(base + "--decode-lookahead sometimes 2>&1");
  EXPECT_NE(r.rc, 0);
  EXPECT_LT(r.rc, 128);
}

TEST_F(ReadmeCli, SpeculativeDecodingKeepsTheGreedyTokens) {
  const std::string base = "run -q -t 1 -p " + kPrompt + " -n 24 --temp 0 ";
  const json plain = cli_json(base + "--spec none");
  ASSERT_EQ(plain["tokens"].size(), 24u);
  EXPECT_FALSE(plain["stats"].contains("spec"));
  const json by_default = cli_json(base);
  EXPECT_EQ(by_default["tokens"], plain["tokens"]);
  EXPECT_TRUE(by_default["stats"].contains("spec"));  // the default model has an MTP head
  struct Case {
    std::string flags;
    size_t depth;
  };
  for (const Case& c : {Case{"--spec mtp --draft-max 3 --draft-fixed", 3},
                        Case{"--spec-type draft-mtp --spec-draft-n-max 2 --draft-fixed", 2},
                        Case{"--spec mtp --draft-max 7 --draft-fixed", 7}}) {
    const json j = cli_json(base + c.flags);
    EXPECT_EQ(j["tokens"], plain["tokens"]) << c.flags;
    const json& s = j["stats"]["spec"];
    EXPECT_EQ(s["acceptance_at"].size(), c.depth) << c.flags;
    EXPECT_GT(s["drafted"].get<int64_t>(), 0) << c.flags;
    EXPECT_LE(s["accepted"].get<int64_t>(), s["drafted"].get<int64_t>()) << c.flags;
  }
  EXPECT_FALSE(cli_json(base + "--spec-type none")["stats"].contains("spec"));
  for (const char* bad : {"--draft-max 8", "--draft-max 0", "--spec-draft-n-max 9"}) {
    const auto r = cli(base + bad + " 2>&1");
    EXPECT_NE(r.rc, 0) << bad;
    EXPECT_LT(r.rc, 128) << bad << " crashed";
    EXPECT_NE(r.out.find("--draft-max"), std::string::npos) << bad << "\n" << r.out;
  }
}

// README: "`bench --spec mtp [--draft-accept P]` measures plain beside speculative generation".
// --draft-accept 1 replaces every proposal by the greedy continuation: all are accepted.
TEST_F(ReadmeCli, BenchSpecMeasuresPlainBesideSpeculative) {
  const json j = cli_json("bench -q -t 1 -p 4 -n 16 -r 1 --spec mtp --draft-accept 1 --draft-max 3 --draft-fixed");
  const json& s = j["spec"];
  EXPECT_EQ(s["identical_to_plain"], true);
  EXPECT_GT(s["drafted"].get<int64_t>(), 0);
  EXPECT_EQ(s["accepted"], s["drafted"]);
  EXPECT_GT(s["plain_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(s["spec_tokens_per_second"].get<double>(), 0);
}

TEST_F(ReadmeCli, InspectListsMetadataHyperparametersAndTensors) {
  const auto r = cli("inspect " + kModel + " 2>&1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(std::to_string(file_->tensors().size()) + " tensors"), std::string::npos) << r.out;
  for (const char* key : {"general.architecture", "qwen35.block_count", "qwen35.embedding_length",
                          "qwen35.full_attention_interval", "tokenizer.ggml.model", "hyperparameters (qwen35)",
                          "embedding 384"})
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
  for (const auto& t : file_->tensors()) EXPECT_NE(r.out.find(t.name), std::string::npos) << t.name;
}

}  // namespace
}  // namespace df
