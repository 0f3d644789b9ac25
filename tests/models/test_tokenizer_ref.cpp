// Tokenizer vs llama.cpp (llama_ref tokenize over libllama) on a few thousand seeded random
// strings: ASCII, code, CJK, emoji, whitespace runs, combining marks, rare and unassigned
// code points, invalid UTF-8, and special-token texts, with parse_special on and off.
#include <gtest/gtest.h>

#include "reference_required.h"

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "ref_harness.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using df::Token;

std::string utf8(uint32_t cpt) {
  std::string s;
  df::unicode::append_utf8(s, cpt);
  return s;
}

// llama.cpp throws (std::invalid_argument escaping llama_tokenize) when its lenient decoder
// meets a 4-byte form above U+10FFFF; such strings are not comparable, so they are redrawn.
bool llama_would_throw(const std::string& s) {
  for (size_t i = 0; i + 3 < s.size(); ++i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if ((b0 & 0xF8) != 0xF0) continue;
    bool cont = true;
    uint32_t v = b0 & 7u;
    for (size_t k = 1; k < 4; ++k) {
      cont = cont && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80;
      v = (v << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3Fu);
    }
    if (cont && v > 0x10FFFF) return true;
  }
  return false;
}

class Generator {
 public:
  // specials: extra texts to scatter into the strings (special tokens of the vocabulary).
  Generator(uint32_t seed, std::vector<std::string> specials)
      : rng_(seed), specials_(std::move(specials)) {}

  std::string string() {
    for (;;) {
      std::string s;
      const int n = pick(1, 12);
      for (int i = 0; i < n; ++i) s += segment();
      if (!llama_would_throw(s)) return s;
    }
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  uint32_t cpt(uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng_);
  }
  template <class T>
  const T& one_of(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }

  std::string segment() {
    std::string s;
    switch (pick(0, 11)) {
      case 0: {  // printable ASCII
        for (int i = pick(1, 20); i > 0; --i) s += static_cast<char>(pick(0x20, 0x7E));
        break;
      }
      case 1: {  // words, contractions, numbers
        static const std::vector<std::string> w = {
            "hello", " world", "It", "'s", "'S", "'re", "'RE", "'ve", "'ll", "'LL", "'d", "'M",
            "'t", " don't", "I'M", " 2024", "3.14159", " 1,000,000", "x2", "Ünïcödé", " naïve",
            "résumé", " façade", "ß", " straße", "İstanbul", " KELVIN\u212A", "'", "''", " '"};
        for (int i = pick(1, 6); i > 0; --i) s += one_of(w);
        break;
      }
      case 2: {  // code
        static const std::vector<std::string> c = {
            "def ", "f(x)", ":\n", "    return", " x", " + ", "1", "\n\n", "\t", "{", "}", "};",
            "//", " /* c */", "->", "::", "==", "!=", "&&", "#include <vector>", "\"str\"",
            "'c'", "0x1F", "__init__", "self.", "[i]", "    ", "\r\n", "$var", "@dec", "`tick`"};
        for (int i = pick(1, 10); i > 0; --i) s += one_of(c);
        break;
      }
      case 3: {  // CJK, kana, hangul, fullwidth
        static const std::vector<std::pair<uint32_t, uint32_t>> r = {
            {0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0xAC00, 0xD7A3}, {0xFF01, 0xFF5E}, {0x3000, 0x303F}};
        for (int i = pick(1, 10); i > 0; --i) {
          const auto& [lo, hi] = one_of(r);
          s += utf8(cpt(lo, hi));
        }
        break;
      }
      case 4: {  // emoji, ZWJ sequences, variation selectors, skin tones, flags
        for (int i = pick(1, 5); i > 0; --i) {
          s += utf8(cpt(0x1F300, 0x1FAFF));
          if (pick(0, 2) == 0) s += utf8(0x200D) + utf8(cpt(0x1F300, 0x1F64F));
          if (pick(0, 3) == 0) s += utf8(0xFE0F);
          if (pick(0, 4) == 0) s += utf8(cpt(0x1F3FB, 0x1F3FF));
          if (pick(0, 5) == 0) s += utf8(cpt(0x1F1E6, 0x1F1FF)) + utf8(cpt(0x1F1E6, 0x1F1FF));
        }
        break;
      }
      case 5: {  // whitespace runs (llama.cpp's \s set, plus look-alikes that are not in it)
        static const std::vector<uint32_t> ws = {' ', ' ', ' ', '\t', '\n', '\n', '\r', 0x0B, 0x0C,
                                                 0x85, 0xA0, 0x1680, 0x2000, 0x2009, 0x200A,
                                                 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x1C,
                                                 0x1F, 0x180E, 0x200B, 0xFEFF};
        for (int i = pick(1, 12); i > 0; --i) s += utf8(one_of(ws));
        if (pick(0, 1)) s += one_of(std::vector<std::string>{"a", "1", "!", "\xCC\x81", "\xE4\xB8\xAD"});
        break;
      }
      case 6: {  // combining marks and scripts that use them
        static const std::vector<std::pair<uint32_t, uint32_t>> r = {
            {0x0300, 0x036F}, {0x0900, 0x097F}, {0x0E00, 0x0E7F}, {0x0600, 0x06FF},
            {0x1780, 0x17FF}, {0x0590, 0x05FF}, {0x20D0, 0x20FF}, {0x0C00, 0x0C7F}};
        for (int i = pick(1, 10); i > 0; --i) {
          if (pick(0, 1)) s += static_cast<char>(pick('a', 'z'));
          const auto& [lo, hi] = one_of(r);
          s += utf8(cpt(lo, hi));
        }
        break;
      }
      case 7: {  // any code point: rare, unassigned, private use, recent Unicode additions
        static const std::vector<std::pair<uint32_t, uint32_t>> r = {
            {0x80, 0x2FFF}, {0xA000, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, 0x1FFFF},
            {0x20000, 0x323AF}, {0xE0000, 0x10FFFF}, {0x2EBF0, 0x2EE5F}, {0x31350, 0x323AF},
            {0x11F00, 0x11F5F}, {0x1E4D0, 0x1E4FF}};
        for (int i = pick(1, 6); i > 0; --i) {
          const auto& [lo, hi] = one_of(r);
          s += utf8(cpt(lo, hi));
        }
        break;
      }
      case 8: {  // invalid UTF-8
        for (int i = pick(1, 4); i > 0; --i) {
          switch (pick(0, 5)) {
            case 0: s += static_cast<char>(pick(0x80, 0xBF)); break;          // stray continuation
            case 1: s += static_cast<char>(pick(0xF8, 0xFF)); break;          // never a lead byte
            case 2: s += utf8(cpt(0x800, 0xFFFF)).substr(0, 2); break;        // truncated
            case 3: s += utf8(cpt(0x10000, 0x10FFFF)).substr(0, pick(1, 3)); break;
            case 4: s += one_of(std::vector<std::string>{"\xC0\x80", "\xC1\xBF", "\xE0\x80\xAF",
                                                         "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x80\x80\x80"});
                    break;
            default: s += static_cast<char>(pick(0xC0, 0xF3)); s += static_cast<char>(pick(0x00, 0x7F)); break;
          }
        }
        break;
      }
      case 9: {  // special-token texts, whole and broken, next to text
        static const std::vector<std::string> t = {
            "<|im_start|>", "<|im_end|>", "<|endoftext|>", "[PAD151646]", "[PAD151700]",
            "[PAD151935]", "<|im_start|>user\n", "<|im_end|>\n", "<|im_start", "im_end|>", "<|",
            "|>", "<|im_end|><|im_end|>", "<|endoftext|>\n\n", " <|im_start|> ", "<think>",
            "</think>", "<|im_start|>assistant\n<think>\n\n</think>\n\n"};
        for (int i = pick(1, 4); i > 0; --i) {
          s += (!specials_.empty() && pick(0, 1)) ? one_of(specials_) : one_of(t);
          if (pick(0, 2) == 0) s += static_cast<char>(pick('a', 'e'));
        }
        break;
      }
      case 10: {  // repeated characters (long words, long whitespace)
        static const std::vector<std::string> t = {"a", " ", "=", "\n", "\xC3\xA0", "1", "'", "-",
                                                   "\xE4\xB8\xAD", "\xF0\x9F\x98\x80"};
        const std::string& u = one_of(t);
        for (int i = pick(2, 80); i > 0; --i) s += u;
        break;
      }
      default: {  // random bytes
        for (int i = pick(1, 8); i > 0; --i) s += static_cast<char>(pick(0, 255));
        break;
      }
    }
    return s;
  }

  std::mt19937 rng_;
  std::vector<std::string> specials_;
};

std::string to_hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (char c : s) {
    h += d[static_cast<uint8_t>(c) >> 4];
    h += d[static_cast<uint8_t>(c) & 15];
  }
  return h;
}

std::string show(const std::vector<Token>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += std::to_string(ids[i]) + " ";
  if (ids.size() > 40) s += "...";
  return s;
}

std::string bl(const std::string& s) {
  std::string out;
  for (char c : s) out += df::unicode::byte_to_utf8(static_cast<uint8_t>(c));
  return out;
}

// Writes the corner-case vocabulary (the model keys are taken from base, a llama.cpp vocab
// file, so llama.cpp accepts it with vocab_only). Returns the texts of its special tokens.
std::vector<std::string> write_corner_vocab(const std::string& base, const std::string& path) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto add = [&](const std::string& text, df::TokenType t = df::TokenType::NORMAL) {
    tokens.push_back(text);
    types.push_back(static_cast<int32_t>(t));
  };
  for (int b = 0; b < 256; ++b) {
    if (b == 'Z' || b == 0xFF || b == 0xA9) continue;  // no token for these bytes
    add(df::unicode::byte_to_utf8(static_cast<uint8_t>(b)));
  }
  const std::vector<std::string> merged = {"th", "the", bl(" t"), bl(" the"), "que", "in", "ing",
                                           bl("  "), bl("\n\n"), "ab", "abc", "ll", "hello", "lo"};
  for (const auto& m : merged) add(m);
  const std::vector<std::string> merges = {
      "t h", "th e", bl(" ") + " t", bl(" t") + " he", "h e", "q u", "qu e", "i n", "in g",
      bl(" ") + " " + bl(" "), bl("\n") + " " + bl("\n"), "a b", "ab c", "l l", "h e", "he ll",
      "hell o", "l o", "t h", "nospace", "x", "a b c"};
  std::vector<std::string> specials;
  auto special = [&](const std::string& text, df::TokenType t) {
    add(text, t);
    specials.push_back(text);
  };
  const auto eos = static_cast<uint32_t>(tokens.size());
  special("<|endoftext|>", df::TokenType::CONTROL);
  special("<|im_start|>", df::TokenType::CONTROL);
  special("<|im_end|>", df::TokenType::NORMAL);  // llama.cpp makes it CONTROL (EOG name)
  special("<|fim_pad|>", df::TokenType::NORMAL);
  special("<unk>", df::TokenType::UNKNOWN);
  special("<unused_ctl>", df::TokenType::CONTROL);
  special("<think>", df::TokenType::USER_DEFINED);
  special("</think>", df::TokenType::USER_DEFINED);
  special("abcd", df::TokenType::USER_DEFINED);  // equal length, overlapping
  special("bcde", df::TokenType::USER_DEFINED);
  special("cdef", df::TokenType::USER_DEFINED);
  special("<a>", df::TokenType::USER_DEFINED);
  special("<a><b>", df::TokenType::USER_DEFINED);
  special(" spaced ", df::TokenType::USER_DEFINED);
  special("\xF0\x9F\x98\x80", df::TokenType::USER_DEFINED);  // an emoji
  special("<ctl>", df::TokenType::CONTROL);
  special("<ctl>x", df::TokenType::CONTROL);
  add("zz", df::TokenType::UNDEFINED);
  add("<0x41>", df::TokenType::BYTE);
  add("<gone>", df::TokenType::UNUSED);

  auto in = df::gguf::File::open(base);
  df::gguf::Writer w;
  for (const auto& [key, value] : in->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) w.set(key, value);
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_u32("tokenizer.ggml.eos_token_id", eos);
  w.set_u32("tokenizer.ggml.bos_token_id", eos);
  w.write(path);
  return specials;
}

std::string llama_vocab(const std::string& name) {
  return std::string(DF_LLAMA_SRC) + "/models/ggml-vocab-" + name + ".gguf";
}

void compare_with_llama(const std::string& vocab, const std::string& vocab_name, uint32_t seed,
                        int n_strings, std::vector<std::string> specials = {}) {
  Generator gen(seed, std::move(specials));
  std::vector<std::string> texts;
  for (int i = 0; i < n_strings; ++i) texts.push_back(gen.string());
  // One long text as well: many words in a single call. Joined by '\n' so that no 4-byte
  // form above U+10FFFF can arise across a boundary.
  std::string joined;
  for (const auto& t : texts) joined += t + "\n";
  texts.push_back(joined);

  nlohmann::json in = nlohmann::json::array();
  for (const auto& t : texts) in.push_back(to_hex(t));
  const std::string base = df::reftest::work_dir() + "/tok_" + vocab_name;
  df::reftest::write_file(base + ".in.json", in.dump());

  auto file = df::gguf::File::open(vocab);
  auto tok = df::Tokenizer::from_gguf(*file);

  for (bool parse_special : {true, false}) {
    const std::string out = base + (parse_special ? ".special" : ".plain") + ".json";
    df::reftest::run(std::string(DF_LLAMA_REF) + " tokenize -m " + vocab + " --in " + base +
                     ".in.json --out " + out + (parse_special ? "" : " --no-special") + " 2>&1");
    const auto ref = nlohmann::json::parse(df::reftest::read_file(out));
    ASSERT_EQ(ref.size(), texts.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto want = ref[i].get<std::vector<Token>>();
      const auto got = tok->encode(texts[i], parse_special);
      if (got == want) continue;
      if (++mismatches <= 10) {
        ADD_FAILURE() << vocab_name << " parse_special=" << parse_special << " case " << i
                      << " hex " << to_hex(texts[i]).substr(0, 400) << "\n  llama " << show(want)
                      << "\n  ours  " << show(got);
      }
    }
    EXPECT_EQ(mismatches, 0u) << "of " << texts.size() << " strings, parse_special=" << parse_special;
  }
}

TEST(TokenizerVsLlama, Qwen2RandomStrings) {
  const std::string v = llama_vocab("qwen2");
  if (!std::filesystem::exists(v)) DF_REFERENCE_MISSING(v << " not found");
  compare_with_llama(v, "qwen2", 1234, 3000);
}
TEST(TokenizerVsLlama, Qwen35RandomStrings) {
  const std::string v = llama_vocab("qwen35");
  if (!std::filesystem::exists(v)) DF_REFERENCE_MISSING(v << " not found");
  compare_with_llama(v, "qwen35", 5678, 3000);
}
TEST(TokenizerVsLlama, Gpt2RandomStrings) {
  const std::string v = llama_vocab("gpt-2");
  if (!std::filesystem::exists(v)) DF_REFERENCE_MISSING(v << " not found");
  compare_with_llama(v, "gpt-2", 91011, 1000);
}

// A small vocabulary trained by our own df_make_model (qwen2 pre-tokenizer, <think> as a
// user-defined token, few merges so most words end in byte tokens).
TEST(TokenizerVsLlama, MakeModelVocab) {
  const std::string v = df::reftest::make_model(
      "tok_vocab", "--layers 1 --dim 64 --ff 64 --heads 2 --kv-heads 1 --head-dim 32");
  compare_with_llama(v, "make_model", 424242, 1500, {"<think>", "</think>", "[PAD960]"});
}

// A vocabulary built to hit llama.cpp's corner cases: missing byte tokens (dropped in the
// fallback), merges through pieces that are not tokens, duplicate and malformed merges,
// overlapping special tokens of equal length, a NORMAL "<|im_end|>" that llama.cpp turns
// into CONTROL, UNKNOWN / UNUSED / UNDEFINED / BYTE token types.
TEST(TokenizerVsLlama, CornerCaseVocab) {
  const std::string base = llama_vocab("qwen2");
  if (!std::filesystem::exists(base)) DF_REFERENCE_MISSING(base << " not found");
  const std::string path = df::reftest::work_dir() + "/tok_corner.gguf";
  std::vector<std::string> texts = write_corner_vocab(base, path);
  for (const char* t : {"queue", " the", "thing", "abcdef", "Zebra", "hello", "\xC2\xA9", " quest"}) {
    texts.push_back(t);
  }
  compare_with_llama(path, "corner", 777, 1500, texts);
}

}  // namespace
