// Unicode helpers for the tokenizer, defined to behave exactly as llama.cpp's unicode.cpp
// (the reference we must agree with token for token), not as a strict UTF-8 library.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace df::unicode {

// The classes the GPT-2/Qwen pre-tokenizer regexes can tell apart. Taken from llama.cpp's
// own category table (unicode_classes.inc), so a newer or older Unicode version inside
// PCRE2 cannot change a split.
enum class CharClass : uint8_t {
  OTHER = 0,   // punctuation, symbols, controls, separators that are not \s, unassigned
  LETTER = 1,  // \p{L}
  NUMBER = 2,  // \p{N}
  MARK = 3,    // \p{M}
  SPACE = 4,   // \s as llama.cpp defines it (unicode_set_whitespace)
};
CharClass char_class(uint32_t cpt);

inline constexpr uint32_t REPLACEMENT = 0xFFFD;

// Decodes one code point at s[*pos] the way llama.cpp does: a lead byte announces the
// length, continuation bytes must be 10xxxxxx, nothing else is checked (overlong forms and
// surrogates decode to their value). A byte that does not start a well-formed sequence
// becomes U+FFFD and consumes exactly one byte. Sequences whose value exceeds U+10FFFF
// (which make llama.cpp throw) are also treated as one invalid byte.
uint32_t decode_one(std::string_view s, size_t* pos);
// Whole-string version of decode_one.
std::vector<uint32_t> decode_lossy(std::string_view s);
// Appends the UTF-8 encoding of cpt (<= 0x10FFFF; surrogates are encoded as-is).
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2 byte-level BPE alphabet: every byte value has a printable code point.
// Bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves, the other 68 bytes to
// U+0100.. in increasing byte order.
uint32_t byte_to_cpt(uint8_t b);
// Inverse of byte_to_cpt; -1 for a code point outside the alphabet.
int cpt_to_byte(uint32_t cpt);
// UTF-8 of byte_to_cpt(b) for every byte (built once, immutable).
const std::string& byte_to_utf8(uint8_t b);

// Number of trailing bytes of s that form a proper prefix of a well-formed UTF-8 sequence
// (a sequence that further bytes could still complete); 0 when s ends on a boundary or in
// bytes that can never become valid.
size_t incomplete_utf8_tail(std::string_view s);

}  // namespace df::unicode
