#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"

namespace df {

BpeMerger::BpeMerger(const StringMap& token_ids, int32_t n_vocab,
                     const std::vector<std::string>& merges)
    : vocab_(token_ids), n_vocab_(n_vocab) {
  size_t cap = 16;
  while (cap < merges.size() * 2) cap *= 2;
  table_.resize(cap);
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) continue;
    const int32_t l = intern(m.substr(0, sp));
    const int32_t r = intern(m.substr(sp + 1));
    joined.assign(m.substr(0, sp));
    joined.append(m.substr(sp + 1));
    add_merge(l, r, Merge{static_cast<int32_t>(rank), intern(joined)});
  }
  for (int b = 0; b < 256; ++b) byte_piece_[b] = piece_id(unicode::byte_to_utf8(static_cast<uint8_t>(b)));
}

int32_t BpeMerger::intern(std::string_view s) {
  if (auto it = vocab_.find(s); it != vocab_.end()) return it->second;
  auto [it, inserted] = extra_.emplace(std::string(s), 0);
  if (inserted) it->second = n_vocab_ + static_cast<int32_t>(extra_.size()) - 1;
  return it->second;
}

int32_t BpeMerger::piece_id(std::string_view s) const {
  if (auto it = vocab_.find(s); it != vocab_.end()) return it->second;
  if (auto it = extra_.find(s); it != extra_.end()) return it->second;
  return -1;
}

void BpeMerger::add_merge(int32_t l, int32_t r, Merge m) {
  const uint64_t k = key(l, r);
  const size_t mask = table_.size() - 1;
  for (size_t i = slot_of(k, mask);; i = (i + 1) & mask) {
    if (table_[i].key == k) return;  // an earlier (lower-rank) merge of the same pair wins
    if (table_[i].key == kEmpty) {
      table_[i] = {k, m};
      ++n_pairs_;
      return;
    }
  }
}

const BpeMerger::Merge* BpeMerger::find_merge(int32_t l, int32_t r) const {
  const uint64_t k = key(l, r);
  const size_t mask = table_.size() - 1;
  for (size_t i = slot_of(k, mask);; i = (i + 1) & mask) {
    if (table_[i].key == k) return &table_[i].merge;
    if (table_[i].key == kEmpty) return nullptr;
  }
}

void BpeMerger::encode_word(std::string_view word, std::vector<Token>& out) const {
  // A symbol is a span of word; merged-away symbols have len 0.
  struct Symbol {
    uint32_t off, len;
    int32_t piece;
    int32_t prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  // Initial symbols: UTF-8 characters by lead-byte length (clipped at the end of the word).
  for (size_t off = 0; off < word.size();) {
    const auto lead = static_cast<uint8_t>(word[off]);
    size_t n = lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    n = std::min(n, word.size() - off);
    const std::string_view ch = word.substr(off, n);
    int32_t piece = -1;
    size_t pos = 0;
    const uint32_t cpt = unicode::decode_one(ch, &pos);
    (void)pos;
    const int b = unicode::cpt_to_byte(cpt);
    if (b >= 0 && unicode::byte_to_utf8(static_cast<uint8_t>(b)) == ch) {
      piece = byte_piece_[static_cast<size_t>(b)];  // the usual case: one byte-level char
    } else {
      piece = piece_id(ch);
    }
    const auto i = static_cast<int32_t>(sym.size());
    sym.push_back({static_cast<uint32_t>(off), static_cast<uint32_t>(n), piece, i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
    off += n;
  }

  struct Candidate {
    int32_t rank, left, right, left_piece, right_piece, result;
    // std::priority_queue pops the largest: invert so the lowest rank, then leftmost, wins.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].piece < 0 || sym[r].piece < 0) return;
    const Merge* m = find_merge(sym[l].piece, sym[r].piece);
    if (m != nullptr) queue.push({m->rank, l, r, sym[l].piece, sym[r].piece, m->result});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) consider(i - 1, i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    // Stale: one side was merged away or has grown since the candidate was queued.
    if (l.len == 0 || r.len == 0 || l.piece != c.left_piece || r.piece != c.right_piece) continue;
    l.len += r.len;
    l.piece = c.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const Symbol& s = sym[i];
    if (s.piece >= 0 && s.piece < n_vocab_) {
      out.push_back(s.piece);
      continue;
    }
    // Not a token: emit the single bytes that are tokens.
    for (uint32_t k = 0; k < s.len; ++k) {
      const int32_t t = piece_id(word.substr(s.off + k, 1));
      if (t >= 0 && t < n_vocab_) out.push_back(t);
    }
  }
}

}  // namespace df
