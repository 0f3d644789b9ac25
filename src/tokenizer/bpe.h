// Byte-pair merging of one pre-tokenized word, by merge rank (tokenizer.ggml.merges; the
// rank of a merge is its index, the first occurrence of a pair wins), leftmost pair first
// on equal ranks — the order llama.cpp's llm_tokenizer_bpe_session uses.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace df {

// Hash for unordered maps keyed by std::string that can be probed with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeMerger {
 public:
  using Token = int32_t;
  // token_ids: vocabulary text -> id. merges: "left right" (split at the first space after
  // the first byte); entries without such a space are ignored.
  BpeMerger(const StringMap& token_ids, int32_t n_vocab,
            const std::vector<std::string>& merges);

  // Appends the tokens of word (text in the byte-level alphabet). A final piece that is not
  // a vocabulary token falls back to its single bytes that are (others are dropped), as in
  // llama.cpp.
  void encode_word(std::string_view word, std::vector<Token>& out) const;

  size_t n_merges() const { return pairs_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // piece id of left + right
  };
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  int32_t piece_id(std::string_view s) const;  // -1 when the string takes part in nothing
  int32_t intern(const std::string& s);

  // Piece ids: vocabulary tokens keep their token id; other strings that occur in merges
  // get ids from n_vocab_ upwards.
  int32_t n_vocab_;
  StringMap pieces_;
  std::unordered_map<uint64_t, Merge> pairs_;
};

}  // namespace df
