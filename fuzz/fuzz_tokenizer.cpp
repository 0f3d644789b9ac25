// libFuzzer target for the tokenizer. The first input byte picks a vocabulary (the default
// model's; llama.cpp's qwen2 / qwen35 vocab files when DF_LLAMA_SRC has them) and whether
// special tokens are parsed; the rest is the text. Every outcome must hold:
//   - encode never throws and gives ids inside the vocabulary;
//   - for valid UTF-8 text, decode(encode(text)) == text (byte-level BPE is lossless, and
//     special tokens render as their text);
//   - the streaming decoder, fed the ids one by one, gives exactly decode(ids);
//   - every piece is what token_to_piece says.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_vocabs.h"
#include "tokenizer/tokenizer.h"

namespace {

using df::fuzz::Vocab;

// Strict UTF-8: shortest forms, no surrogates, at most U+10FFFF.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; }
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace

const std::vector<Vocab>* g_vocabs = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_vocabs = new std::vector<Vocab>(df::fuzz::load_vocabs({"qwen2", "qwen35"}));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<Vocab>& vocabs = *g_vocabs;
  if (size == 0) return 0;
  const Vocab& v = vocabs[(data[0] >> 1) % vocabs.size()];
  const bool parse_special = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const df::Tokenizer& tok = *v.tok;

  const std::vector<df::Token> ids = tok.encode(text, parse_special);  // must not throw
  for (df::Token t : ids)
    if (t < 0 || t >= tok.n_vocab()) __builtin_trap();
  const std::string decoded = tok.decode(ids);
  if (valid_utf8(text) && decoded != text) __builtin_trap();

  df::StreamDecoder stream(tok);
  std::string streamed, pieces;
  for (df::Token t : ids) {
    streamed += stream.push(t);
    pieces += tok.token_to_piece(t);
  }
  streamed += stream.flush();
  if (streamed != decoded || pieces != decoded) __builtin_trap();
  return 0;
}
