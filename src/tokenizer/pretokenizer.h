// Splits text into words before BPE, with the regex llama.cpp uses for the vocabulary's
// tokenizer.ggml.pre, run by PCRE2.
//
// llama.cpp does not run these regexes with a regex engine: it has hand-written matchers
// over its own Unicode category table and decodes invalid UTF-8 to U+FFFD. To agree with it
// exactly we (1) decode the text the same way (unicode::decode_one), and (2) hand PCRE2 a
// "canonical" copy of the text in which each code point is replaced by a representative of
// its llama.cpp class (letter -> 'a', number -> '0', other -> '!', space -> '\t',
// mark -> U+0300), keeping the characters the regexes name literally (' ', '\r', '\n', '\'',
// and the letters of the contractions). PCRE2's Unicode version then cannot matter.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace df {

class PreTokenizer {
 public:
  // pre: tokenizer.ggml.pre. Throws df::Error naming an unsupported pre-tokenizer.
  explicit PreTokenizer(std::string_view pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Words of text in order, each re-encoded from its decoded code points (so invalid bytes
  // appear as U+FFFD) and then mapped to the GPT-2 byte alphabet, ready for BPE.
  std::vector<std::string> split(std::string_view text) const;

  // The regex in use (the original pattern from llama.cpp's llm_tokenizer_bpe).
  const std::string& regex() const { return regex_; }

  // Names accepted for tokenizer.ggml.pre.
  static bool supported(std::string_view pre);

 private:
  std::string regex_;
  struct Compiled;
  std::unique_ptr<Compiled> re_;
};

}  // namespace df
