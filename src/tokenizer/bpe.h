// Byte-pair merging of one pre-tokenized word, by merge rank (tokenizer.ggml.merges; the
// rank of a merge is its index, the first occurrence of a pair wins), leftmost pair first
// on equal ranks — the order llama.cpp's llm_tokenizer_bpe_session uses.
#pragma once
#include <array>
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
  // token_ids: vocabulary text -> id; must outlive the merger. merges: "left right" (split
  // at the first space after the first byte); entries without such a space are ignored.
  BpeMerger(const StringMap& token_ids, int32_t n_vocab, const std::vector<std::string>& merges);

  // Appends the tokens of word (text in the byte-level alphabet). A final piece that is not
  // a vocabulary token falls back to its single bytes that are (others are dropped), as in
  // llama.cpp.
  void encode_word(std::string_view word, std::vector<Token>& out) const;

  size_t n_merges() const { return n_pairs_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;  // piece id of left + right
  };
  // Open-addressing table (left piece, right piece) -> Merge; power-of-two size.
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{};
  };
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  static size_t slot_of(uint64_t k, size_t mask) {
    k ^= k >> 33;  // murmur3 finaliser
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<size_t>(k) & mask;
  }
  const Merge* find_merge(int32_t l, int32_t r) const;
  void add_merge(int32_t l, int32_t r, Merge m);  // keeps an existing entry (lower rank)

  int32_t piece_id(std::string_view s) const;  // -1 when the string takes part in nothing
  int32_t intern(std::string_view s);

  // Piece ids: vocabulary tokens keep their token id; other strings that occur in merges
  // get ids from n_vocab_ upwards.
  const StringMap& vocab_;
  int32_t n_vocab_;
  StringMap extra_;
  std::vector<Slot> table_;
  size_t n_pairs_ = 0;
  // Piece of each single byte's byte-level character (-1 if none), for the initial symbols.
  std::array<int32_t, 256> byte_piece_{};
};

}  // namespace df
