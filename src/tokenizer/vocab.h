// The vocabulary as llama.cpp's llama_vocab::impl::load sets it up for a byte-level BPE
// model: token attributes (including the ones llama.cpp adjusts by token text), resolved
// special ids, the end-of-generation set, the special-token list used to split text, and
// each token's piece. Internal to the tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"

namespace df {

// llama_token_attr bits.
enum TokenAttr : uint32_t {
  TOKEN_ATTR_UNDEFINED = 0,
  TOKEN_ATTR_UNKNOWN = 1u << 0,
  TOKEN_ATTR_UNUSED = 1u << 1,
  TOKEN_ATTR_NORMAL = 1u << 2,
  TOKEN_ATTR_CONTROL = 1u << 3,
  TOKEN_ATTR_USER_DEFINED = 1u << 4,
  TOKEN_ATTR_BYTE = 1u << 5,
};

struct Vocab {
  std::vector<std::string> text;  // token text ("[EMPTY_i]" for an empty entry, as llama.cpp)
  std::vector<TokenType> type;    // declared GGUF type
  std::vector<uint32_t> attr;     // TokenAttr bits after llama.cpp's adjustments
  StringMap ids;                  // text -> id

  Token bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, sep = -1, pad = -1, mask = -1;
  Token fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;

  std::vector<Token> eog;            // end-of-generation ids, ascending
  std::vector<Token> special_split;  // CONTROL/USER_DEFINED/UNKNOWN ids, longest text first
  std::vector<std::string> piece;    // token_to_piece(id, special=true)
};

// Throws df::Error for an unsupported tokenizer model or malformed arrays.
Vocab build_vocab(const TokenizerSource& src);

}  // namespace df
