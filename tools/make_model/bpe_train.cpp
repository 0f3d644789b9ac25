// Byte-level BPE training (see bpe_train.h). Plain counting: every round recounts the pairs
// of all distinct pre-tokens, which is fast enough for the few-KB corpora this is used on.
#include "bpe_train.h"

#include <map>
#include <unordered_map>
#include <utility>

#include "common/error.h"

namespace df::make_model {

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_newline(unsigned char c) { return c == '\r' || c == '\n'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_punct(unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }

}  // namespace

// GPT-2's map: printable bytes map to themselves, the other 68 bytes to U+0100.. in order.
std::string byte_to_unicode(uint8_t b) {
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255); };
  if (printable(b)) return utf8(b);
  int n = 0;
  for (int x = 0; x < b; ++x)
    if (!printable(x)) ++n;
  return utf8(256 + static_cast<uint32_t>(n));
}

std::vector<std::string> pre_split(std::string_view t) {
  std::vector<std::string> out;
  const size_t n = t.size();
  auto at = [&](size_t i) -> unsigned char { return i < n ? static_cast<unsigned char>(t[i]) : 0; };
  size_t i = 0;
  while (i < n) {
    const size_t s = i;
    const unsigned char c = at(i);
    if (c == '\'') {  // contractions 's 't 're 've 'm 'll 'd
      static const char* kSuffix[] = {"s", "t", "re", "ve", "m", "ll", "d"};
      size_t len = 0;
      for (const char* suf : kSuffix) {
        const std::string_view sv(suf);
        if (t.substr(i + 1, sv.size()) == sv) {
          len = sv.size();
          break;
        }
      }
      if (len) {
        out.emplace_back(t.substr(i, len + 1));
        i += len + 1;
        continue;
      }
    }
    if (is_letter(c) || (!is_newline(c) && !is_letter(c) && !is_digit(c) && c && is_letter(at(i + 1)))) {
      ++i;  // letter or one leading non-letter
      while (i < n && is_letter(at(i))) ++i;
    } else if (is_digit(c)) {
      ++i;
    } else if (is_punct(c) || (c == ' ' && is_punct(at(i + 1)))) {
      if (c == ' ') ++i;
      while (i < n && is_punct(at(i))) ++i;
      while (i < n && is_newline(at(i))) ++i;
    } else {  // whitespace run
      size_t e = i;
      while (e < n && is_space(at(e))) ++e;
      size_t last_nl = std::string::npos;
      for (size_t k = i; k < e; ++k)
        if (is_newline(at(k))) last_nl = k;
      if (last_nl != std::string::npos) {
        i = last_nl + 1;
      } else if (e < n && e - i > 1) {
        i = e - 1;  // leave one space for the next word
      } else {
        i = e;
      }
    }
    out.emplace_back(t.substr(s, i - s));
  }
  return out;
}

Vocab train_byte_bpe(std::string_view corpus, int32_t vocab_size) {
  static const std::vector<std::pair<std::string, int32_t>> kSpecials = {
      {"<|endoftext|>", 3}, {"<|im_start|>", 3}, {"<|im_end|>", 3}, {"<think>", 4}, {"</think>", 4}};
  const int32_t n_special = static_cast<int32_t>(kSpecials.size());
  if (vocab_size < 256 + n_special)
    throw Error("vocab size " + std::to_string(vocab_size) + " is below 256 bytes + " +
                std::to_string(n_special) + " special tokens");
  Vocab v;
  std::unordered_map<std::string, int32_t> id_of;
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
    v.types.push_back(1);
    id_of[v.tokens.back()] = b;
  }

  // Distinct pre-tokens with their counts; std::map keeps the order deterministic.
  std::map<std::string, int64_t> freq;
  for (auto& w : pre_split(corpus)) ++freq[w];
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> counts;
  for (const auto& [w, c] : freq) {
    std::vector<int32_t> ids;
    for (unsigned char ch : w) ids.push_back(ch);
    words.push_back(std::move(ids));
    counts.push_back(c);
  }

  const int32_t target = vocab_size - n_special;
  while (static_cast<int32_t>(v.tokens.size()) < target) {
    std::map<std::pair<int32_t, int32_t>, int64_t> pairs;
    for (size_t w = 0; w < words.size(); ++w)
      for (size_t k = 0; k + 1 < words[w].size(); ++k) pairs[{words[w][k], words[w][k + 1]}] += counts[w];
    std::pair<int32_t, int32_t> best{-1, -1};
    int64_t best_count = 1;  // a pair must occur at least twice
    for (const auto& [p, c] : pairs)
      if (c > best_count) best = p, best_count = c;  // strict: ties keep the smallest pair
    if (best.first < 0) break;

    const std::string& a = v.tokens[static_cast<size_t>(best.first)];
    const std::string& b = v.tokens[static_cast<size_t>(best.second)];
    v.merges.push_back(a + " " + b);
    const std::string merged = a + b;
    int32_t id;
    if (auto it = id_of.find(merged); it != id_of.end()) {
      id = it->second;  // same text reached by another pair: one token, two merges
    } else {
      id = static_cast<int32_t>(v.tokens.size());
      v.tokens.push_back(merged);
      v.types.push_back(1);
      id_of[merged] = id;
      ++v.n_learnt;
    }
    for (auto& ids : words) {
      std::vector<int32_t> next;
      next.reserve(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) {
        if (k + 1 < ids.size() && ids[k] == best.first && ids[k + 1] == best.second) {
          next.push_back(id);
          ++k;
        } else {
          next.push_back(ids[k]);
        }
      }
      ids = std::move(next);
    }
  }

  for (const auto& [text, type] : kSpecials) {
    id_of[text] = static_cast<int32_t>(v.tokens.size());
    v.tokens.push_back(text);
    v.types.push_back(type);
  }
  v.bos = id_of["<|endoftext|>"];
  v.pad = v.bos;
  v.eos = id_of["<|im_end|>"];
  while (static_cast<int32_t>(v.tokens.size()) < vocab_size) {
    v.tokens.push_back("[PAD" + std::to_string(v.tokens.size()) + "]");
    v.types.push_back(4);
  }
  return v;
}

}  // namespace df::make_model
