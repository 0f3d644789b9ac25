// llama.cpp's own tokenizer expectations (models/ggml-vocab-*.gguf with .inp/.out, the files
// its tests/test-tokenizer-0 reads): every case must give exactly the listed ids.
#include <gtest/gtest.h>

#include "reference_required.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

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
  if (src.empty()) DF_REFERENCE_MISSING("DF_LLAMA_SRC not set");
  const std::string base = src + "/models/ggml-vocab-" + name + ".gguf";
  if (!std::filesystem::exists(base) || !std::filesystem::exists(base + ".inp")) {
    DF_REFERENCE_MISSING(base << " not found");
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

namespace {

// unicode_classes.inc is generated from llama.cpp's src/unicode-data.cpp; check every code
// point against the source tree we test with, so a llama.cpp update cannot drift silently.
TEST(TokenizerLlamaVocab, CharClassesMatchLlamaUnicodeData) {
  const std::string src = DF_LLAMA_SRC;
  if (src.empty()) DF_REFERENCE_MISSING("DF_LLAMA_SRC not set");
  const std::string path = src + "/src/unicode-data.cpp";
  if (!std::filesystem::exists(path)) DF_REFERENCE_MISSING(path << " not found");
  const std::string data = read_all(path);
  auto block = [&](const std::string& name) {
    const size_t a = data.find(name);
    const size_t b = data.find("\n};", a);
    EXPECT_NE(a, std::string::npos) << name;
    return data.substr(a, b - a);
  };
  // {0xSTART, 0xFLAGS} pairs, then the whitespace set.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  {
    const std::string b = block("unicode_ranges_flags");
    for (size_t p = b.find("{0x"); p != std::string::npos; p = b.find("{0x", p + 1)) {
      const uint32_t start = static_cast<uint32_t>(std::stoul(b.substr(p + 1, 8), nullptr, 16));
      const size_t q = b.find("0x", p + 3);
      ranges.emplace_back(start, static_cast<uint32_t>(std::stoul(b.substr(q, 6), nullptr, 16)));
    }
  }
  std::vector<uint32_t> spaces;
  {
    const std::string b = block("unicode_set_whitespace");
    for (size_t p = b.find("0x"); p != std::string::npos; p = b.find("0x", p + 1)) {
      spaces.push_back(static_cast<uint32_t>(std::stoul(b.substr(p, 8), nullptr, 16)));
    }
  }
  ASSERT_GT(ranges.size(), 1000u);
  ASSERT_EQ(ranges.back().first, 0x110000u);
  ASSERT_GT(spaces.size(), 10u);
  using df::unicode::CharClass;
  size_t wrong = 0;
  for (size_t i = 0; i + 1 < ranges.size(); ++i) {
    const uint32_t flags = ranges[i].second;
    // llama.cpp flag bits: NUMBER 0x2, LETTER 0x4, ACCENT_MARK 0x10.
    const CharClass want = (flags & 0x4)    ? CharClass::LETTER
                           : (flags & 0x2)  ? CharClass::NUMBER
                           : (flags & 0x10) ? CharClass::MARK
                                            : CharClass::OTHER;
    for (uint32_t c = ranges[i].first; c < ranges[i + 1].first; ++c) {
      const bool space = std::find(spaces.begin(), spaces.end(), c) != spaces.end();
      const CharClass expect = space ? CharClass::SPACE : want;
      if (df::unicode::char_class(c) != expect && ++wrong <= 5) {
        ADD_FAILURE() << "U+" << std::hex << c << " class " << int(df::unicode::char_class(c))
                      << " want " << int(expect);
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
