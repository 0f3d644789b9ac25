// The qwen35 MTP (next-n prediction) head, as llama.cpp's llama_model_qwen35::graph_mtp:
//   e = enorm(embed(x_p));  h = hnorm(hidden_prev)       (hidden_prev: trunk's h_{p-1}, after output_norm)
//   x = eh_proj . [e ; h]                                 (concat along features, e first)
//   x += gated_attention(attn_norm(x))                    (the block's own KV cache, IMROPE)
//   x += SwiGLU(post_attention_norm(x))                  (qwen35moe: the MoE FFN, graph_mtp of qwen35moe.cpp)
//   logits = head(shared_head_norm(x))                    (nextn.shared_head_head, else the trunk's output)
// The block is blk.<n_layer>: only the first nextn layer is run (llama.cpp supports one).
#include <string>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/kv_state.h"
#include "models/qwen35_mtp.h"

namespace df::qwen35 {
namespace {

// The head's state: one attention layer's KV cache.
class MtpState final : public KvState {
 public:
  MtpState(Backend& b, const ModelInfo& m, const StateOptions& opt) : KvState(opt) {
    cache = b.alloc_kv_cache(opt.n_ctx, m.n_head_kv * m.head_dim, opt.kv_f32 ? GgmlType::F32 : GgmlType::F16);
  }
  uint64_t cache_bytes() const override { return cache.nbytes(); }

  KvCache cache;  // graphs: the head steps recorded over it (draft chain, catch-up rows)
};

}  // namespace

Mtp::Mtp(const gguf::File& f, Backend& b, const Hparams& hp, const Tensor& tok_embd, const blocks::OutputHead& trunk)
    : b_(b), hp_(hp), vocab_(b), ws_(b) {
  const ModelInfo& m = hp.info;
  const int64_t l = m.n_layer, dim = m.n_embd;
  const std::string p = "blk." + std::to_string(l) + ".";
  WeightLoader w(f, b);
  block_ = load_layer(w, hp, l, /*recurrent=*/false);
  eh_proj_ = w.get(p + "nextn.eh_proj.weight", 2 * dim, dim);  // [dim, 2 * dim]
  enorm_ = w.get_f32(p + "nextn.enorm.weight", dim);
  hnorm_ = w.get_f32(p + "nextn.hnorm.weight", dim);
  embed_ = w.has(p + "nextn.embed_tokens.weight") ? w.get(p + "nextn.embed_tokens.weight", dim, m.n_vocab) : tok_embd;
  head_.norm = w.has(p + "nextn.shared_head_norm.weight") ? w.get_f32(p + "nextn.shared_head_norm.weight", dim) : trunk.norm;
  head_.out = trunk.out;
  head_.out_host = trunk.out_host;
  if (w.has(p + "nextn.shared_head_head.weight")) {
    head_.out = w.get(p + "nextn.shared_head_head.weight", dim, m.n_vocab);
    head_.out_host = w.host(p + "nextn.shared_head_head.weight");
  }
  vocab_.reset(head_, m.n_vocab);
  bytes_ = w.bytes_loaded();
  shape_ = blocks::attn_shape(m, hp.sections);
}

void Mtp::set_draft_vocab(int64_t n, int64_t context_slots) {
  const int64_t n_vocab = hp_.info.n_vocab;
  if (n <= 0 || n > n_vocab) n = n_vocab;
  if (n == vocab_.prefix() && (n == n_vocab || context_slots == vocab_.slots())) return;
  if (ran_) throw Error("mtp: the drafting vocabulary is set before the head's first forward");
  vocab_.set(n, context_slots);
}

std::unique_ptr<ModelState> Mtp::new_state(const StateOptions& opt) {
  if (opt.n_ctx <= 0 || opt.max_chunk <= 0) throw Error("context and chunk sizes must be positive");
  if (ws_.grow(opt.max_chunk)) {
    const ModelInfo& m = hp_.info;
    x_ = ws_.make(m.n_embd);
    xn_ = ws_.make(m.n_embd);
    e_ = ws_.make(m.n_embd);
    cat_ = ws_.make(2 * m.n_embd);
    attn_ = blocks::make_attn_scratch(ws_, m, true);
    if (hp_.moe) {
      moe_ = make_moe_scratch(hp_.moe_shape, [&](int64_t cols, GgmlType t) { return ws_.make(cols, t); });
      ffn_out_ = ws_.make(m.n_embd);
    } else {
      gate_ = ws_.make(m.n_ff);
      up_ = ws_.make(m.n_ff);
    }
  }
  return std::make_unique<MtpState>(b_, hp_.info, opt);
}

ForwardOutputs Mtp::forward(ModelState& state, const Batch& batch, const Tensor& hidden_prev, const ForwardOptions& opt) {
  const ModelInfo& m = hp_.info;
  auto* st = dynamic_cast<MtpState*>(&state);
  if (!st) throw Error("mtp forward: the state was not made by this MTP head");
  ModelState* states[1] = {st};
  b_.set_row_exact(opt.row_exact);
  ForwardOptions up;  // the head keeps no snapshots; device ids as the caller asks
  up.ids_from = opt.ids_from;
  up.ids_row0 = opt.ids_row0;
  const blocks::BatchInputs in = ws_.upload(batch, states, m.n_vocab, up);
  const int64_t n = in.n, dim = m.n_embd;
  if (hidden_prev.type != GgmlType::F32 || hidden_prev.cols != dim || hidden_prev.rows != n)
    throw Error("mtp forward: hidden_prev must be f32 [rows, n_embd]");
  const Tensor x = x_.slice_rows(0, n), xn = xn_.slice_rows(0, n), e = e_.slice_rows(0, n);
  const Tensor cat = cat_.slice_rows(0, n);
  // Rows [0, nc) before the first output row only feed the head's KV cache: the head is one
  // layer, so nothing reads their attention output, FFN or logits. They run eh_proj and the
  // K/V part of attention (blocks::attention_kv_rows); the rows from nc on run the whole block.
  // Apart only where that keeps every used value's bits: all rows cache-only (no row-count
  // dependent product remains), or row-exact kernels (a row's bits whatever the row count).
  const int64_t first_out = in.rows.empty() ? n : in.rows.front();
  const int64_t nc = first_out == n || opt.row_exact ? first_out : 0;
  auto ops = [&] {
    b_.get_rows(embed_, in.ids, e);                               // e [n, dim]
    b_.rms_norm(e, enorm_, m.rms_eps, cat.slice_cols(0, dim));    // cat [n, 2 * dim] = [enorm(e) ; hnorm(h)]
    b_.rms_norm(hidden_prev, hnorm_, m.rms_eps, cat.slice_cols(dim, dim));
    b_.matmul(eh_proj_, cat, x);                                  // x [n, dim]
    if (nc > 0)                                                   // cache-only rows: K, V
      blocks::attention_kv_rows(b_, block_.attn, shape_, attn_, in.sub(0, nc), st->cache, x.slice_rows(0, nc),
                                block_.attn_norm, xn.slice_rows(0, nc));
    if (nc < n) {
      // x += attention(attn_norm(x)); x += ffn(post_attention_norm(x)), through the fused
      // blocks the trunk uses (the same ops in the same order on the CPU; fewer launches on CUDA)
      blocks::BatchInputs tail;  // rows nc.. as a batch of their own (only where some are cache-only)
      if (nc > 0) tail = in.sub(nc, n - nc);
      const blocks::BatchInputs& rest = nc > 0 ? tail : in;
      const int64_t r = n - nc;
      const Tensor xr = x.slice_rows(nc, r), xnr = xn.slice_rows(nc, r);
      KvCache* caches[1] = {&st->cache};
      blocks::attention_residual(b_, block_.attn, shape_, attn_, rest, caches, xr, block_.attn_norm, xnr);
      if (hp_.moe) {
        moe_ffn_residual(b_, hp_.moe_shape, block_.moe, moe_, xr, block_.post_norm, m.rms_eps, xnr,
                         ffn_out_.slice_rows(0, r));               // x += MoE(post_norm(x))
      } else {
        blocks::swiglu_ffn_residual(b_, block_.ffn, xr, block_.post_norm, m.rms_eps, xnr, gate_.slice_rows(0, r),
                                    up_.slice_rows(0, r));
      }
    }
    return blocks::output_head(b_, vocab_.head(), m.rms_eps, ws_, in, x, vocab_.columns(), opt);  // logits [.., columns]
  };
  // The drafting vocabulary's slots take the tokens of the rows whose ids the host has (not the
  // device drafts: ids_from), before the step (its rows are uploaded; a graph only replays).
  if (vocab_.slots() > 0) {
    const int64_t d0 = opt.ids_from.empty() ? n : opt.ids_row0, d1 = opt.ids_from.empty() ? n : d0 + opt.ids_from.rows;
    vocab_.note(batch.token.data(), d0);
    if (d1 < n) vocab_.note(batch.token.data() + d1, n - d1);
  }
  // A repeated head step (the draft chain's one-row steps, catch-up rows of one length)
  // replays as a recorded graph; hidden_prev's address is baked into it (a MoE head too: its
  // matmul_id reads the routed ids on the device).
  const int64_t hkey[2] = {reinterpret_cast<int64_t>(hidden_prev.data), static_cast<int64_t>(hidden_prev.stride)};
  const ForwardOutputs out = st->use_graphs() ? st->graphs.run(b_, ws_, in, opt, ops, hkey) : ops();
  ran_ = true;
  st->last_pos0 = in.segments[0].pos0;
  st->last_n = n;
  st->pos = st->last_pos0 + n;
  return out;
}

}  // namespace df::qwen35
