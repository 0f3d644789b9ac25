// The byte-level BPE tokenizer: special-token partition, pre-tokenizer, BPE with a per-call
// word cache, and byte-level decoding. Behaviour follows llama.cpp's llama_vocab::impl
// (tokenize with add_special = false, token_to_piece).
#include <algorithm>
#include <unordered_map>

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace df {
namespace {

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(const TokenizerSource& src)
      : pre_(src.pre),  // validates the pre-tokenizer before the (slower) vocabulary build
        vocab_(build_vocab(src)),
        bpe_(vocab_.ids, static_cast<int32_t>(vocab_.text.size()), src.merges) {}
  BpeTokenizer(const BpeTokenizer&) = delete;  // bpe_ refers to vocab_.ids
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  std::vector<Token> encode(std::string_view text, bool parse_special) const override;

  std::string token_to_piece(Token t, bool render_special) const override {
    check(t);
    const uint32_t special = TOKEN_ATTR_UNKNOWN | TOKEN_ATTR_CONTROL;
    if (!render_special && (vocab_.attr[t] & special)) return {};
    return vocab_.piece[t];
  }

  std::string decode(const std::vector<Token>& ids, bool render_special) const override {
    std::string out;
    for (Token t : ids) out += token_to_piece(t, render_special);
    return out;
  }

  int32_t n_vocab() const override { return static_cast<int32_t>(vocab_.text.size()); }
  TokenType token_type(Token t) const override {
    check(t);
    return vocab_.type[t];
  }
  const std::string& token_text(Token t) const override {
    check(t);
    return vocab_.text[t];
  }
  Token find(std::string_view text) const override {
    auto it = vocab_.ids.find(text);
    return it == vocab_.ids.end() ? -1 : it->second;
  }
  std::vector<Token> stop_tokens() const override { return vocab_.eog; }
  bool is_stop(Token t) const override {
    return std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), t);
  }
  Token bos_id() const override { return vocab_.bos; }
  Token eos_id() const override { return vocab_.eos; }
  Token eot_id() const override { return vocab_.eot; }

 private:
  void check(Token t) const {
    if (t < 0 || t >= n_vocab()) {
      throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(n_vocab()) + ")");
    }
  }

  // A piece of the input: raw text still to tokenize, or a special token found in it.
  struct Fragment {
    Token token;  // -1 for raw text
    size_t off, len;
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

  PreTokenizer pre_;
  Vocab vocab_;
  BpeMerger bpe_;
};

// llama.cpp's tokenizer_st_partition: for each special token, longest first, every raw
// fragment is split at each (leftmost, non-overlapping) occurrence. Without parse_special
// only USER_DEFINED tokens are split out; CONTROL and UNKNOWN texts stay plain text.
std::vector<BpeTokenizer::Fragment> BpeTokenizer::partition(std::string_view text,
                                                            bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (Token id : vocab_.special_split) {
    if (!parse_special && (vocab_.attr[id] & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_UNKNOWN))) continue;
    const std::string& special = vocab_.text[id];
    // Cheap rejection: most special tokens do not occur at all.
    if (text.find(special) == std::string_view::npos) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view window = text.substr(0, f.off + f.len);
      size_t start = f.off;
      for (size_t m; (m = window.find(special, start)) != std::string_view::npos;) {
        if (m > start) next.push_back({-1, start, m - start});
        next.push_back({id, 0, 0});
        start = m + special.size();
      }
      if (start < f.off + f.len) next.push_back({-1, start, f.off + f.len - start});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<Token> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<Token> out;
  // Words repeat a lot in real text; BPE each distinct word once per call.
  std::unordered_map<std::string, std::vector<Token>> cache;
  for (const Fragment& f : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      continue;
    }
    for (std::string& word : pre_.split(text.substr(f.off, f.len))) {
      auto it = cache.find(word);
      if (it == cache.end()) {
        std::vector<Token> toks;
        bpe_.encode_word(word, toks);
        it = cache.emplace(std::move(word), std::move(toks)).first;
      }
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  return out;
}

void check_model(const std::string& model) {
  if (model != "gpt2") {
    throw Error("unsupported tokenizer model tokenizer.ggml.model = '" + model +
                "' (only 'gpt2' byte-level BPE is supported)");
  }
}

const std::vector<int32_t>& int32_array(const gguf::File& f, const std::string& key) {
  const gguf::Value* v = f.find(key);
  const auto* arr = std::get_if<std::vector<int32_t>>(&v->as_array(key));
  if (arr == nullptr) throw Error("'" + key + "' must be an array of int32");
  return *arr;
}

}  // namespace

TokenizerSource Tokenizer::read_source(const gguf::File& f) {
  TokenizerSource src;
  src.model = f.get_string("tokenizer.ggml.model");
  check_model(src.model);
  src.pre = f.get_string("tokenizer.ggml.pre", "");
  if (src.pre.empty()) {
    throw Error("tokenizer.ggml.pre is missing; llama.cpp would fall back to its 'default' "
                "pre-tokenizer, which is not supported (supported: qwen2, qwen35, gpt-2)");
  }
  src.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type")) src.token_types = int32_array(f, "tokenizer.ggml.token_type");
  src.merges = f.get_string_array("tokenizer.ggml.merges");
  for (const char* name :
       {"bos_token_id", "eos_token_id", "eot_token_id", "eom_token_id", "unknown_token_id",
        "seperator_token_id", "padding_token_id", "mask_token_id", "fim_pre_token_id",
        "fim_suf_token_id", "fim_mid_token_id", "fim_pad_token_id", "fim_rep_token_id",
        "fim_sep_token_id", "prefix_token_id", "suffix_token_id", "middle_token_id"}) {
    const std::string key = std::string("tokenizer.ggml.") + name;
    const gguf::Value* v = f.find(key);
    if (v == nullptr) continue;
    if (!v->is_integer()) throw Error("'" + key + "' must be an integer");
    // A negative id (signed key) means "none".
    if (const auto* u = std::get_if<uint64_t>(&v->v)) {
      src.ids.emplace_back(name, *u);
    } else if (const int64_t i = std::get<int64_t>(v->v); i >= 0) {
      src.ids.emplace_back(name, static_cast<uint64_t>(i));
    }
  }
  return src;
}

std::unique_ptr<Tokenizer> Tokenizer::from_source(const TokenizerSource& src) {
  check_model(src.model);
  return std::make_unique<BpeTokenizer>(src);
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  return from_source(read_source(f));
}

}  // namespace df
