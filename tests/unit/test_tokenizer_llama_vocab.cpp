// llama.cpp's own tokenizer expectations (models/ggml-vocab-*.gguf with .inp/.out, the files
// its tests/test-tokenizer-0 reads): every case must give exactly the listed ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Case {
  std::string text;
  std::vector<df::Token> ids;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// .inp: cases separated by "\n__ggml_vocab_test__\n"; .out: one line of ids per case.
std::vector<Case> read_cases(const std::string& inp_path, const std::string& out_path) {
  const std::string inp = read_all(inp_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::ifstream out(out_path);
  std::vector<Case> cases;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    Case c;
    c.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ls(line);
    for (df::Token t; ls >> t;) c.ids.push_back(t);
    cases.push_back(std::move(c));
  }
  EXPECT_EQ(cases.size(), texts.size()) << inp_path;
  return cases;
}

std::string show(const std::vector<df::Token>& ids) {
  std::string s;
  for (df::Token t : ids) s += std::to_string(t) + " ";
  return s;
}

void run_vocab(const std::string& name) {
  const std::string src = DF_LLAMA_SRC;
  if (src.empty()) GTEST_SKIP() << "DF_LLAMA_SRC not set";
  const std::string base = src + "/models/ggml-vocab-" + name + ".gguf";
  if (!std::filesystem::exists(base) || !std::filesystem::exists(base + ".inp")) {
    GTEST_SKIP() << base << " not found";
  }
  auto file = df::gguf::File::open(base);
  auto tok = df::Tokenizer::from_gguf(*file);
  const auto cases = read_cases(base + ".inp", base + ".out");
  ASSERT_GT(cases.size(), 10u);
  size_t failed = 0;
  for (const Case& c : cases) {
    const auto got = tok->encode(c.text, /*parse_special=*/false);
    if (got != c.ids) {
      ++failed;
      ADD_FAILURE() << name << ": '" << c.text << "'\n  want " << show(c.ids) << "\n  got  " << show(got);
    }
    // Byte-level BPE is lossless for valid UTF-8 text.
    EXPECT_EQ(tok->decode(got), c.text);
  }
  EXPECT_EQ(failed, 0u) << "of " << cases.size() << " cases";
}

TEST(TokenizerLlamaVocab, Qwen2) { run_vocab("qwen2"); }
TEST(TokenizerLlamaVocab, Qwen35) { run_vocab("qwen35"); }
TEST(TokenizerLlamaVocab, Gpt2) { run_vocab("gpt-2"); }

}  // namespace
