#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace df {

// Everything but a trailing proper prefix of a well-formed UTF-8 sequence goes out now.
// Bytes that can never become valid UTF-8 are passed through rather than held back.
std::string StreamDecoder::push(Token t) {
  pending_ += tok_.token_to_piece(t, /*render_special=*/true);
  const size_t keep = unicode::incomplete_utf8_tail(pending_);
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace df
