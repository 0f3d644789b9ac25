// The MTP head's drafting vocabulary (MtpHead::set_draft_vocab): which tokens a draft step
// scores, so that it reads a share of the output projection instead of all of it.
//   logits columns [0, prefix)               token ids [0, prefix): the projection's first rows
//   logits columns [prefix, prefix + slots)  tokens with ids >= prefix met in the head's input
//                                            (prompt and generated tokens), first met first kept,
//                                            the oldest replaced when every slot is taken
// With slots, the columns' rows are one weight of their own (Backend::weight_slots: the prefix's
// rows, then the slots' rows, replaced by Backend::weight_set_row), so a draft step's logits are
// one product. A slot not yet taken holds token 0's row and id: its logit ties column 0's, and
// argmax (lowest column on ties) resolves it to column 0, so a greedy draft is the best token of
// the columns in use; the host's sampling reads columns [0, used()) only.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "models/blocks.h"

namespace df {

class DraftVocab {
 public:
  explicit DraftVocab(Backend& b) : b_(&b) {}
  // head: the output head the drafts use (its `out` [n_vocab, dim] and the file's bytes of it);
  // the whole vocabulary until set().
  void reset(const blocks::OutputHead& head, int64_t n_vocab);
  // prefix <= 0 or >= n_vocab: the whole vocabulary (no slots). slots: context slots (0: none).
  void set(int64_t prefix, int64_t slots);
  int64_t prefix() const { return prefix_; }
  int64_t slots() const { return slots_; }
  int64_t columns() const { return prefix_ + slots_; }
  int64_t used() const { return prefix_ + filled_; }  // columns that hold a token now
  int32_t id_of(int64_t column) const;
  // [columns(), 1] i32 on the device: column -> token id (empty without slots: column == id).
  const Tensor& ids() const { return ids_; }
  // The drafts' output head: out [columns(), dim] (the prefix's rows, then the slots').
  const blocks::OutputHead& head() const { return head_; }
  // Takes tokens met in the head's input (not inside a graph capture: rows are uploaded).
  void note(const int32_t* ids, int64_t n);

 private:
  Backend* b_;
  blocks::OutputHead full_;        // the whole projection
  blocks::OutputHead head_;        // full_ with out = the columns' rows
  int64_t n_vocab_ = 0, prefix_ = 0, slots_ = 0, filled_ = 0, next_ = 0;  // next_: the slot replaced next
  Tensor ids_;                     // [prefix_ + slots_, 1] i32
  std::vector<int32_t> ids_host_;  // [slots_] the slots' ids
  std::unordered_map<int32_t, int64_t> slot_of_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
};

}  // namespace df
