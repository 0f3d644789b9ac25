// Byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2") read from a GGUF file, with the
// qwen2 / qwen35 pre-tokenizers, special/control tokens and a streaming UTF-8-safe decoder.
// Must agree with llama.cpp's tokenizer (llama-vocab.cpp) token for token.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace df::gguf {
class File;
}

namespace df {

using Token = int32_t;

// Token attributes as in GGUF tokenizer.ggml.token_type.
enum class TokenType : int32_t {
  UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6,
};

// Everything the tokenizer takes from the tokenizer.ggml.* keys. from_gguf() fills it from a
// file; tests build small vocabularies directly.
struct TokenizerSource {
  std::string model = "gpt2";        // tokenizer.ggml.model
  std::string pre;                   // tokenizer.ggml.pre
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens (id = index)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type; empty = all NORMAL
  std::vector<std::string> merges;   // tokenizer.ggml.merges (rank = index)
  // The tokenizer.ggml.<name> id keys present in the file, e.g. {"eos_token_id", 151643}.
  std::vector<std::pair<std::string, uint64_t>> ids;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* keys. Throws df::Error for an unsupported model/pre-tokenizer or
  // malformed vocabulary.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& f);
  static TokenizerSource read_source(const gguf::File& f);
  static std::unique_ptr<Tokenizer> from_source(const TokenizerSource& src);
  virtual ~Tokenizer() = default;

  // parse_special: text such as "<|im_start|>" becomes the special token (llama.cpp
  // parse_special=true); without it CONTROL/UNKNOWN token texts are plain text, while
  // USER_DEFINED tokens (e.g. "<think>") are still split out, as llama.cpp does.
  // Invalid UTF-8 bytes are tokenized as U+FFFD. No BOS is ever added (Qwen has none).
  // Thread-safe (const, no shared mutable state).
  virtual std::vector<Token> encode(std::string_view text, bool parse_special) const = 0;
  // Bytes of one token (special tokens render as their text when render_special).
  virtual std::string token_to_piece(Token t, bool render_special = true) const = 0;
  virtual std::string decode(const std::vector<Token>& ids, bool render_special = true) const = 0;

  virtual int32_t n_vocab() const = 0;
  virtual TokenType token_type(Token t) const = 0;
  virtual const std::string& token_text(Token t) const = 0;  // raw vocabulary string
  // Looks a token up by its vocabulary text; -1 when absent.
  virtual Token find(std::string_view text) const = 0;
  // End-of-generation ids, as llama.cpp's llama_vocab_is_eog: eos, eot and eom ids, the
  // tokens named <|im_end|>, <|endoftext|> (and the other end-of-turn names llama.cpp knows),
  // and the FIM pad/repo/file-separator tokens. Sorted ascending.
  virtual std::vector<Token> stop_tokens() const = 0;
  virtual bool is_stop(Token t) const = 0;
  // Special ids as llama.cpp resolves them (key, else its default or detection); -1 if none.
  virtual Token bos_id() const = 0;
  virtual Token eos_id() const = 0;
  virtual Token eot_id() const = 0;
};

// Turns a stream of token ids into text chunks that never split a UTF-8 sequence.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the complete characters now available (possibly empty).
  std::string push(Token t);
  // Whatever is left (incomplete sequences are emitted as-is at the end).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

// Qwen ChatML prompt: <|im_start|>{role}\n{content}<|im_end|>\n ... then
// <|im_start|>assistant\n and "<think>\n" (thinking on) or "<think>\n\n</think>\n\n" (off).
struct ChatMessage {
  std::string role;
  std::string content;
};
std::string chat_prompt(const std::vector<ChatMessage>& messages, bool add_assistant, bool think);

}  // namespace df
