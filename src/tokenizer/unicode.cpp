#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <utility>

namespace df::unicode {
namespace {

struct ClassRun {
  uint32_t first;  // first code point of the run
  uint8_t cls;     // CharClass
};
constexpr ClassRun kClassRuns[] = {
#include "tokenizer/unicode_classes.inc"
};

bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Bytes of the GPT-2 alphabet that keep their own code point.
bool byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> cpt{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 68> shifted_byte{};  // byte for U+0100 + i
  ByteTables() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      if (byte_is_printable(b)) {
        cpt[b] = static_cast<uint32_t>(b);
      } else {
        shifted_byte[n] = static_cast<int16_t>(b);
        cpt[b] = 256u + static_cast<uint32_t>(n++);
      }
      append_utf8(utf8[b], cpt[b]);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

CharClass char_class(uint32_t cpt) {
  if (cpt >= 0x110000) return CharClass::OTHER;
  // Last run whose first code point is <= cpt.
  const auto* it = std::upper_bound(std::begin(kClassRuns), std::end(kClassRuns), cpt,
                                    [](uint32_t c, const ClassRun& r) { return c < r.first; });
  return static_cast<CharClass>((it - 1)->cls);
}

uint32_t decode_one(std::string_view s, size_t* pos) {
  const size_t i = *pos;
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t b0 = b(0);
  size_t n = 0;
  uint32_t value = 0;
  if (b0 < 0x80) {
    *pos = i + 1;
    return b0;
  } else if ((b0 & 0x40) == 0) {
    n = 0;  // continuation byte cannot start a sequence
  } else if ((b0 & 0x20) == 0) {
    n = 2;
    value = b0 & 0x1Fu;
  } else if ((b0 & 0x10) == 0) {
    n = 3;
    value = b0 & 0x0Fu;
  } else if ((b0 & 0x08) == 0) {
    n = 4;
    value = b0 & 0x07u;
  }
  bool ok = n != 0 && i + n <= s.size();
  for (size_t k = 1; ok && k < n; ++k) {
    ok = is_cont(b(k));
    value = (value << 6) | (b(k) & 0x3Fu);
  }
  if (!ok || value > 0x10FFFF) {
    *pos = i + 1;
    return REPLACEMENT;
  }
  *pos = i + n;
  return value;
}

std::vector<uint32_t> decode_lossy(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(decode_one(s, &pos));
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt <= 0x7F) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt <= 0x7FF) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt <= 0xFFFF) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

uint32_t byte_to_cpt(uint8_t b) { return byte_tables().cpt[b]; }

const std::string& byte_to_utf8(uint8_t b) { return byte_tables().utf8[b]; }

int cpt_to_byte(uint32_t cpt) {
  if (cpt < 256) return byte_is_printable(static_cast<int>(cpt)) ? static_cast<int>(cpt) : -1;
  if (cpt < 256 + 68) return byte_tables().shifted_byte[cpt - 256];
  return -1;
}

size_t incomplete_utf8_tail(std::string_view s) {
  const size_t size = s.size();
  for (size_t k = 1; k <= 3 && k <= size; ++k) {
    const auto lead = static_cast<uint8_t>(s[size - k]);
    if (is_cont(lead)) continue;
    // Length announced by a well-formed lead byte, and the range its second byte must be in.
    size_t n = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      n = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      n = 3;
      if (lead == 0xE0) lo = 0xA0;
      if (lead == 0xED) hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      n = 4;
      if (lead == 0xF0) lo = 0x90;
      if (lead == 0xF4) hi = 0x8F;
    }
    if (n <= k) return 0;  // not a lead byte, or the sequence is already complete
    if (k >= 2) {
      const auto second = static_cast<uint8_t>(s[size - k + 1]);
      if (second < lo || second > hi) return 0;
    }
    return k;
  }
  return 0;
}

}  // namespace df::unicode
