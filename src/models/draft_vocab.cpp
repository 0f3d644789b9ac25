#include "models/draft_vocab.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace df {

void DraftVocab::reset(const blocks::OutputHead& head, int64_t n_vocab) {
  *this = DraftVocab(*b_);
  full_ = head_ = head;
  n_vocab_ = prefix_ = n_vocab;
}

void DraftVocab::set(int64_t prefix, int64_t slots) {
  if (slots < 0) throw Error("mtp: the drafting vocabulary's context slots must not be negative");
  if (prefix <= 0 || prefix >= n_vocab_) prefix = n_vocab_, slots = 0;
  slots = std::min(slots, n_vocab_ - prefix);
  if (prefix == prefix_ && slots == slots_) return;
  if (prefix_ != n_vocab_) throw Error("mtp: the drafting vocabulary is set once per model");
  if (!full_.out_host) throw Error("mtp: the output projection's bytes are unknown");
  prefix_ = prefix;
  slots_ = slots;
  if (slots_ == 0) {
    head_.out = b_->weight_rows(full_.out, prefix_, full_.out_host);  // [prefix, dim]
    return;
  }
  // [prefix + slots, dim]: the file's rows [0, prefix), then token 0's row in every slot
  const size_t rb = full_.out.stride;  // the file's bytes of one row (weight() keeps the file's stride)
  std::vector<uint8_t> rows(rb * static_cast<size_t>(prefix_ + slots_));
  std::memcpy(rows.data(), full_.out_host, rb * static_cast<size_t>(prefix_));
  for (int64_t s = 0; s < slots_; ++s) std::memcpy(rows.data() + rb * static_cast<size_t>(prefix_ + s), full_.out_host, rb);
  head_.out = b_->weight_slots(full_.out, prefix_ + slots_, rows.data(), buffers_);
  ids_ = alloc_tensor(*b_, GgmlType::I32, 1, prefix_ + slots_, buffers_);
  std::vector<int32_t> ids(static_cast<size_t>(prefix_ + slots_), 0);
  for (int64_t c = 0; c < prefix_; ++c) ids[static_cast<size_t>(c)] = static_cast<int32_t>(c);
  b_->upload(ids_, ids.data(), ids.size() * sizeof(int32_t));
  ids_host_.assign(static_cast<size_t>(slots_), 0);
}

int32_t DraftVocab::id_of(int64_t column) const {
  if (column < 0 || column >= columns()) throw Error("mtp: a drafting column outside the vocabulary");
  return column < prefix_ ? static_cast<int32_t>(column) : ids_host_[static_cast<size_t>(column - prefix_)];
}

void DraftVocab::note(const int32_t* ids, int64_t n) {
  if (slots_ == 0) return;
  const size_t rb = full_.out.stride;
  int64_t lo = slots_, hi = -1;  // slots whose id changed
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = ids[i];
    if (t < prefix_ || t >= n_vocab_ || slot_of_.count(t)) continue;
    int64_t s = filled_;
    if (filled_ < slots_) {
      ++filled_;
    } else {  // all taken: the oldest goes
      s = next_;
      next_ = (next_ + 1) % slots_;
      slot_of_.erase(ids_host_[static_cast<size_t>(s)]);
    }
    b_->weight_set_row(head_.out, prefix_ + s, static_cast<const uint8_t*>(full_.out_host) + rb * static_cast<size_t>(t));
    ids_host_[static_cast<size_t>(s)] = t;
    slot_of_[t] = s;
    lo = std::min(lo, s), hi = std::max(hi, s);
  }
  if (hi >= lo)
    b_->upload(ids_.slice_rows(prefix_ + lo, hi - lo + 1), ids_host_.data() + lo,
               static_cast<size_t>(hi - lo + 1) * sizeof(int32_t));
}

}  // namespace df
