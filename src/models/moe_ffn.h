// The mixture-of-experts FFN block of qwen35moe (and qwen3next-style files): a softmax router
// over n_expert experts picks n_used per token, whose SwiGLU outputs are summed with the
// router's weights renormalised to 1 (llama.cpp build_moe_ffn with norm_w), plus a shared
// expert scaled by sigmoid(ffn_gate_inp_shexp . x):
//   p = softmax(router . x);  ids, w = top-k(p), w / sum(w)
//   out = sum_j w_j * down_j(silu(gate_j . x) * (up_j . x)) + sigmoid(g . x) * shared(x)
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/model.h"
#include "models/weights.h"

namespace df {

struct MoeShape {
  int64_t n_embd = 0;
  int64_t n_expert = 0;      // expert_count
  int64_t n_used = 0;        // expert_used_count
  int64_t n_ff_exp = 0;      // expert_feed_forward_length
  int64_t n_ff_shexp = 0;    // expert_shared_feed_forward_length (0: no shared expert)
  bool norm_weights = true;  // renormalise the chosen experts' weights to sum 1
  float weights_scale = 0;   // multiply the weights by this unless 0 or 1
};

struct MoeFfn {
  Tensor router;        // [n_expert, dim] ffn_gate_inp
  Tensor gate_exps;     // [n_expert * n_ff_exp, dim] ffn_gate_exps (expert e: rows e * n_ff_exp ..)
  Tensor up_exps;       // [n_expert * n_ff_exp, dim] ffn_up_exps
  Tensor down_exps;     // [n_expert * dim, n_ff_exp] ffn_down_exps
  Tensor shexp_gate_inp;  // [1, dim] ffn_gate_inp_shexp (f32)
  Tensor shexp_gate;    // [n_ff_shexp, dim]
  Tensor shexp_up;      // [n_ff_shexp, dim]
  Tensor shexp_down;    // [dim, n_ff_shexp]
};

// Per-state activations of the block for up to max_rows rows.
struct MoeScratch {
  Tensor logits;        // [B, n_expert] router logits
  Tensor ids;           // [B, n_used] i32 chosen experts
  Tensor weights;       // [B, n_used]
  Tensor gate, up;      // [B * n_used, n_ff_exp]
  Tensor down;          // [B * n_used, dim] each chosen expert's output
  Tensor sh_gate, sh_up;  // [B, n_ff_shexp]
  Tensor sh_out;        // [B, dim]
  Tensor sh_g;          // [B, 1] shared expert gate
};

// The expert keys of <m.arch>.*: expert_count, expert_used_count, expert_feed_forward_length
// (default n_ff / used), expert_shared_feed_forward_length (default n_ff), as llama.cpp's
// qwen35moe loader reads them (softmax gating, weights renormalised, no scale). A per-layer
// array is accepted when all its entries agree.
MoeShape read_moe_shape(const gguf::File& f, const ModelInfo& m);
// Reads the block's tensors blk.<l>.ffn_* (prefix "blk.<l>.").
MoeFfn load_moe_ffn(WeightLoader& w, const std::string& prefix, const MoeShape& s);
// The scratch from `make(cols, type)`, which returns a dense [B, cols] tensor (B rows: the
// most rows one call takes); the per-slot tensors are [B, k * cols] seen as [B * k, cols].
MoeScratch make_moe_scratch(const MoeShape& s, const std::function<Tensor(int64_t cols, GgmlType type)>& make);
// x [n, dim] += MoE(rms_norm(x, norm)): xn [n, dim] receives rms_norm(x, norm) (the experts'
// input), out [n, dim] the MoE output (scratch).
void moe_ffn_residual(Backend& b, const MoeShape& s, const MoeFfn& f, const MoeScratch& t, const Tensor& x,
                      const Tensor& norm, float eps, const Tensor& xn, const Tensor& out);
// Backend::moe_forecast for the block (x [n, dim] the residual before the layer's mixer, or
// with draft the rows' token embeddings (MoeForecast::draft); block: the MoE block's index; xn
// and the block's logits scratch may be overwritten).
void moe_ffn_forecast(Backend& b, const MoeShape& s, const MoeFfn& f, const MoeScratch& t, const Tensor& x,
                      const Tensor& norm, float eps, const Tensor& xn, bool draft = false, int64_t block = 0);
// Weight bytes of the block, and those one token reads: router, n_used experts, the shared expert.
uint64_t moe_weight_bytes(const MoeFfn& f);
uint64_t moe_bytes_per_token(const MoeShape& s, const MoeFfn& f);

}  // namespace df
