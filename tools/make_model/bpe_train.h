// Deterministic byte-level BPE training for the model generator: the vocabulary of a small
// "gpt2"-style tokenizer (GGUF tokenizer.ggml.model = gpt2, pre = qwen2) learnt from a text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace df::make_model {

// GPT-2's reversible byte -> printable code point map, as UTF-8 (e.g. ' ' -> "Ġ").
std::string byte_to_unicode(uint8_t b);

struct Vocab {
  std::vector<std::string> tokens;  // GGUF tokenizer.ggml.tokens (byte-unicode form)
  std::vector<int32_t> types;       // tokenizer.ggml.token_type (1 normal, 3 control, 4 user)
  std::vector<std::string> merges;  // tokenizer.ggml.merges, "left right", by rank
  int32_t bos = -1, eos = -1, pad = -1;
  int32_t n_learnt = 0;             // tokens added by merges
};

// Vocabulary of exactly vocab_size tokens:
//   [0, 256)           one token per byte, id = byte value;
//   [256, 256 + m)     merge results, most frequent pair first (ties: smallest id pair),
//                      learnt on corpus split into pre-tokens roughly as qwen2 splits;
//   then the specials  <|endoftext|> <|im_start|> <|im_end|> (CONTROL), <think> </think>
//                      (USER_DEFINED), as Qwen3 has them;
//   then [PAD<id>]     USER_DEFINED fillers when the corpus runs out of pairs seen twice.
// Throws df::Error when vocab_size < 256 + 5.
Vocab train_byte_bpe(std::string_view corpus, int32_t vocab_size);

// Splits text into training pre-tokens (letters with an optional leading non-letter, single
// digits, punctuation runs with an optional leading space, whitespace runs).
std::vector<std::string> pre_split(std::string_view text);

}  // namespace df::make_model
