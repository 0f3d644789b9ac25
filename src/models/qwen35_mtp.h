// The qwen35 MTP head (qwen35_mtp.cpp): a model part built from the file's first nextn layer.
#pragma once
#include <memory>

#include "models/blocks.h"
#include "models/draft_vocab.h"
#include "models/model.h"
#include "models/qwen35_parts.h"

namespace df::qwen35 {

class Mtp final : public MtpHead {
 public:
  // tok_embd, trunk: the trunk's embedding table and output head (used when the nextn layer
  // has no embed_tokens / shared_head_* of its own).
  Mtp(const gguf::File& f, Backend& b, const Hparams& hp, const Tensor& tok_embd, const blocks::OutputHead& trunk);
  std::unique_ptr<ModelState> new_state(const StateOptions& opt) override;
  ForwardOutputs forward(ModelState& state, const Batch& batch, const Tensor& hidden_prev,
                         const ForwardOptions& opt) override;
  void set_draft_vocab(int64_t n, int64_t context_slots) override;
  int64_t draft_vocab() const override { return vocab_.prefix(); }
  int64_t draft_slots() const override { return vocab_.slots(); }
  int64_t draft_columns_used() const override { return vocab_.used(); }
  int32_t draft_id(int64_t column) const override { return vocab_.id_of(column); }
  const Tensor& draft_ids() const override { return vocab_.ids(); }
  uint64_t weight_bytes() const { return bytes_; }

 private:
  Backend& b_;
  const Hparams& hp_;
  Layer block_;             // the decoder block (gated attention + SwiGLU, or the MoE FFN of qwen35moe)
  Tensor eh_proj_;          // [dim, 2 * dim]
  Tensor enorm_, hnorm_;    // [dim] f32
  Tensor embed_;            // [n_vocab, dim] (the trunk's token_embd unless the layer has its own)
  blocks::OutputHead head_; // shared_head_norm / shared_head_head (or the trunk's)
  DraftVocab vocab_;        // what a draft step scores (set_draft_vocab)
  bool ran_ = false;        // a forward has run (graphs may hold the drafting vocabulary's weights)
  blocks::AttnShape shape_;
  uint64_t bytes_ = 0;
  blocks::Workspace ws_;    // its own: the trunk's outputs (hidden_prev) stay valid
  Tensor x_, xn_, e_;       // [B, dim]
  Tensor cat_;              // [B, 2 * dim]
  blocks::AttnScratch attn_;
  Tensor gate_, up_;        // [B, n_ff] (SwiGLU)
  MoeScratch moe_;          // qwen35moe: the MoE FFN's activations
  Tensor ffn_out_;          // [B, dim] qwen35moe: MoE FFN output
};

// The head of another GGUF file `head` for the trunk of `trunk` (qwen35_mtp_file.cpp): its
// MTP block must be blk.<n_layer> of the trunk's architecture and vocabulary; tensors are
// loaded with the trunk's shapes. Throws df::Error naming the file and the tensor or key
// that does not fit. `head` must outlive the returned head (weights may point into it).
std::unique_ptr<Mtp> mtp_from_file(const gguf::File& trunk, const gguf::File& head, Backend& b, const Hparams& hp,
                                   const Tensor& tok_embd, const blocks::OutputHead& out);

}  // namespace df::qwen35
