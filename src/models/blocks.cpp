#include "models/blocks.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <variant>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::blocks {

// ---- hyperparameters ----

int64_t KeyReader::u(const std::string& key) const { return static_cast<int64_t>(f_.get_u64(prefix_ + key)); }

int64_t KeyReader::u_or(const std::string& key, int64_t d) const {
  return static_cast<int64_t>(f_.get_u64(prefix_ + key, static_cast<uint64_t>(d)));
}

float KeyReader::f_or(const std::string& key, double d) const {
  return static_cast<float>(f_.get_f64(prefix_ + key, d));
}

std::vector<int64_t> KeyReader::ints(const std::string& key) const {
  const std::string name = prefix_ + key;
  const gguf::Value* v = f_.find(name);
  if (!v) return {};
  std::vector<int64_t> out;
  std::visit(
      [&](const auto& vec) {
        using E = typename std::decay_t<decltype(vec)>::value_type;
        if constexpr (std::is_integral_v<E>) {
          for (auto e : vec) out.push_back(static_cast<int64_t>(e));
        } else {
          throw Error("key '" + name + "' must be an array of integers");
        }
      },
      v->as_array(name));
  return out;
}

void read_common_hparams(const KeyReader& k, ModelInfo& m) {
  const std::string& a = m.arch;
  m.name = k.file().get_string("general.name", "");
  m.n_embd = k.u("embedding_length");
  m.n_ff = k.u("feed_forward_length");
  m.n_head = k.u("attention.head_count");
  m.n_head_kv = k.u_or("attention.head_count_kv", m.n_head);
  if (m.n_embd <= 0 || m.n_ff <= 0 || m.n_head <= 0 || m.n_head_kv <= 0)
    throw Error(a + ": embedding_length, feed_forward_length and head counts must be positive");
  if (m.n_head % m.n_head_kv != 0)
    throw Error(a + ": attention.head_count must be a multiple of attention.head_count_kv");
  m.head_dim = k.u_or("attention.key_length", m.n_embd / m.n_head);
  if (k.u_or("attention.value_length", m.head_dim) != m.head_dim)
    throw Error(a + ": attention.value_length must equal attention.key_length");
  m.n_rot = k.u_or("rope.dimension_count", m.head_dim);
  if (m.head_dim <= 0 || m.n_rot <= 0 || m.n_rot > m.head_dim || m.n_rot % 2 != 0)
    throw Error(a + ": rope.dimension_count must be even and at most the head size");
  m.n_ctx_train = k.u_or("context_length", 4096);
  m.rope_base = k.f_or("rope.freq_base", 10000.0);
  m.rms_eps = k.f_or("attention.layer_norm_rms_epsilon", 1e-6);
}

void read_vocab(const gguf::File& f, ModelInfo& m) {
  const gguf::TensorInfo& emb = f.tensor("token_embd.weight");
  if (emb.ne.size() != 2) throw Error("tensor 'token_embd.weight' must be 2-D");
  m.n_vocab = emb.ne[1];
}

// ---- weights ----

AttnWeights load_attention(WeightLoader& w, const std::string& p, const ModelInfo& m, bool gated) {
  const int64_t dim = m.n_embd, hd = m.head_dim, qd = m.n_head * hd, kvd = m.n_head_kv * hd;
  AttnWeights W;
  W.gated = gated;
  W.wq = w.get(p + "attn_q.weight", dim, gated ? 2 * qd : qd);
  W.wk = w.get(p + "attn_k.weight", dim, kvd);
  W.wv = w.get(p + "attn_v.weight", dim, kvd);
  W.q_norm = w.get_f32(p + "attn_q_norm.weight", hd);
  W.k_norm = w.get_f32(p + "attn_k_norm.weight", hd);
  W.wo = w.get(p + "attn_output.weight", qd, dim);
  return W;
}

FfnWeights load_ffn(WeightLoader& w, const std::string& p, const ModelInfo& m) {
  FfnWeights W;
  W.gate = w.get(p + "ffn_gate.weight", m.n_embd, m.n_ff);
  W.up = w.get(p + "ffn_up.weight", m.n_embd, m.n_ff);
  W.down = w.get(p + "ffn_down.weight", m.n_ff, m.n_embd);
  return W;
}

OutputHead load_output_head(WeightLoader& w, const Tensor& tok_embd, ModelInfo& m) {
  OutputHead H;
  H.norm = w.get_f32("output_norm.weight", m.n_embd);
  m.tied_output = !w.has("output.weight");
  H.out = m.tied_output ? tok_embd : w.get("output.weight", m.n_embd, m.n_vocab);
  H.out_host = w.host(m.tied_output ? "token_embd.weight" : "output.weight");
  return H;
}

void set_weight_bytes(const WeightLoader& w, const Tensor& tok_embd, ModelInfo& m) {
  m.weight_bytes = w.bytes_loaded();
  const uint64_t emb_bytes = tok_embd.nbytes();
  m.bytes_per_token = m.weight_bytes - emb_bytes + tok_embd.stride + (m.tied_output ? emb_bytes : 0);
}

// ---- workspace and batch preamble ----

bool Workspace::grow(int64_t rows) {
  if (rows <= rows_) return false;
  buffers_.clear();
  bytes_ = 0;
  rows_ = rows;
  ++generation_;
  inputs_ = alloc_tensor(b_, GgmlType::I32, 1, 3 * rows, buffers_);
  bytes_ += inputs_.nbytes();
  staging_.assign(static_cast<size_t>(3 * rows), 0);
  return true;
}

Tensor Workspace::make(int64_t cols, GgmlType t) {
  Tensor out = alloc_tensor(b_, t, cols, rows_, buffers_);
  bytes_ += out.nbytes();
  return out;
}

namespace {

// An output tensor of at least n rows, regrown (doubling) when a larger one is asked for.
Tensor grow_rows(Backend& b, Tensor& t, int64_t n, int64_t cols, std::vector<std::shared_ptr<Buffer>>& owner,
                 uint64_t& generation) {
  if (t.data == nullptr || t.rows < n || t.cols != cols) {
    ++generation;
    const int64_t rows = std::max<int64_t>(n, t.data ? 2 * t.rows : 1);
    t = alloc_tensor(b, GgmlType::F32, cols, rows, owner);
  }
  return t.slice_rows(0, n);
}

}  // namespace

Tensor Workspace::hidden(int64_t n_out, int64_t dim) { return grow_rows(b_, hidden_, n_out, dim, out_buffers_, generation_); }
Tensor Workspace::logits(int64_t n_out, int64_t n_vocab) { return grow_rows(b_, logits_, n_out, n_vocab, out_buffers_, generation_); }

BatchInputs Workspace::upload(const Batch& batch, std::span<ModelState* const> states, int64_t n_vocab,
                              const ForwardOptions& opt) {
  const int64_t n = batch.size();
  if (n <= 0) throw Error("forward: the batch is empty");
  if (static_cast<int64_t>(batch.pos.size()) != n || static_cast<int64_t>(batch.seq.size()) != n ||
      static_cast<int64_t>(batch.output.size()) != n)
    throw Error("forward: batch token, pos, seq and output must have one entry per row");
  if (n > rows_)
    throw Error("forward: " + std::to_string(n) + " rows, more than the " + std::to_string(rows_) +
                " the workspace holds (the largest max_chunk of the states)");
  BatchInputs in;
  in.n = n;
  std::vector<bool> seen(states.size(), false);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t tok = batch.token[static_cast<size_t>(i)], p = batch.pos[static_cast<size_t>(i)];
    const int32_t s = batch.seq[static_cast<size_t>(i)];
    if (tok < 0 || tok >= n_vocab) throw Error("token id " + std::to_string(tok) + " is outside the vocabulary");
    if (s < 0 || static_cast<size_t>(s) >= states.size() || !states[static_cast<size_t>(s)])
      throw Error("forward: row " + std::to_string(i) + " names sequence " + std::to_string(s) + ", which has no state");
    if (i > 0 && batch.seq[static_cast<size_t>(i - 1)] == s) {
      if (p != batch.pos[static_cast<size_t>(i - 1)] + 1)
        throw Error("forward: positions of a sequence's rows must be consecutive");
      ++in.segments.back().n;
    } else {
      if (seen[static_cast<size_t>(s)]) throw Error("forward: the rows of a sequence must be contiguous");
      seen[static_cast<size_t>(s)] = true;
      if (p < 0) throw Error("forward: negative position");
      in.segments.push_back(Segment{s, i, 1, p});
    }
    if (batch.output[static_cast<size_t>(i)]) in.rows.push_back(static_cast<int32_t>(i));
  }
  for (const Segment& g : in.segments) {
    const ModelState& st = *states[static_cast<size_t>(g.seq)];
    if (g.pos0 + g.n > st.n_ctx()) throw Error("forward: positions past the context");
    if (opt.snapshots && g.n > st.max_snapshots())
      throw Error("forward: " + std::to_string(g.n) + " rows with snapshots, but the state keeps " +
                  std::to_string(st.max_snapshots()));
  }
  // One upload: ids | positions | output rows.
  const auto n_out = static_cast<int64_t>(in.rows.size());
  std::copy(batch.token.begin(), batch.token.end(), staging_.begin());
  std::copy(batch.pos.begin(), batch.pos.end(), staging_.begin() + n);
  std::copy(in.rows.begin(), in.rows.end(), staging_.begin() + 2 * n);
  const Tensor used = inputs_.slice_rows(0, 2 * n + n_out);
  b_.upload(used, staging_.data(), used.nbytes());
  in.ids = inputs_.slice_rows(0, n);
  in.pos = inputs_.slice_rows(n, n);
  in.out_rows = inputs_.slice_rows(2 * n, n_out);
  if (opt.ids_from.data) {  // device ids over the placeholders (stream order: after the upload)
    const Tensor& f = opt.ids_from;
    if (f.type != GgmlType::I32 || f.cols != 1 || opt.ids_row0 < 0 || opt.ids_row0 + f.rows > n)
      throw Error("forward: ids_from must be an i32 [k, 1] tensor inside the batch's rows");
    b_.copy(f, in.ids.slice_rows(opt.ids_row0, f.rows));
  }
  return in;
}

BatchInputs BatchInputs::sub(int64_t r0, int64_t cnt) const {
  if (segments.size() != 1 || r0 < 0 || cnt < 0 || r0 + cnt > n)
    throw Error("batch rows: one sequence, a range inside the batch");
  BatchInputs t;
  t.n = cnt;
  t.ids = ids.slice_rows(r0, cnt);
  t.pos = pos.slice_rows(r0, cnt);
  t.out_rows = out_rows.slice_rows(0, 0);
  const Segment& g = segments[0];
  t.segments.push_back(Segment{g.seq, 0, cnt, g.pos0 + r0});
  return t;
}

// ---- blocks ----

AttnShape attn_shape(const ModelInfo& m, const int32_t sections[4]) {
  AttnShape s;
  s.attn.n_head = static_cast<int32_t>(m.n_head);
  s.attn.n_head_kv = static_cast<int32_t>(m.n_head_kv);
  s.attn.head_dim = static_cast<int32_t>(m.head_dim);
  s.attn.scale = 1.0f / std::sqrt(static_cast<float>(m.head_dim));
  s.rope.head_dim = s.attn.head_dim;
  s.rope.n_rot = static_cast<int32_t>(m.n_rot);
  s.rope.freq_base = m.rope_base;
  for (int i = 0; i < 4; ++i) s.rope.sections[i] = sections ? sections[i] : 0;
  s.eps = m.rms_eps;
  s.eps_block = m.rms_eps;
  return s;
}

AttnScratch make_attn_scratch(Workspace& ws, const ModelInfo& m, bool gated) {
  const int64_t qd = m.n_head * m.head_dim, kv = m.n_head_kv * m.head_dim;
  AttnScratch t;
  if (gated) {
    t.qg = ws.make(2 * qd);
    t.gate = ws.make(qd);
  }
  t.q = ws.make(qd);
  t.k = ws.make(kv);
  t.v = ws.make(kv);
  t.att = ws.make(qd);
  return t;
}

namespace {

// The attention block after its projections t.q (or t.qg), t.k, t.v: q/k norms, RoPE, KV store
// and attention per sequence, the gate -> t.att [n, n_head * hd].
void attention_core(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
                    std::span<KvCache* const> caches) {
  const int64_t n = in.n, hd = s.attn.head_dim, nh = s.attn.n_head;
  const Tensor q = t.q.slice_rows(0, n), k = t.k.slice_rows(0, n), v = t.v.slice_rows(0, n);
  const Tensor att = t.att.slice_rows(0, n);
  RopeParams rq = s.rope, rk = s.rope;
  rq.n_head = s.attn.n_head;
  rk.n_head = s.attn.n_head_kv;
  if (in.segments.size() == 1) {  // one sequence: one fused op
    if (W.gated)
      b.gated_qk_norm_rope_attention(t.qg.slice_rows(0, n), q, t.gate.slice_rows(0, n), k, v, W.q_norm, W.k_norm,
                                     s.eps, in.pos, rq, rk, *caches[0], s.attn, att);
    else
      b.qk_norm_rope_attention(q, k, v, W.q_norm, W.k_norm, s.eps, in.pos, rq, rk, *caches[0], s.attn, att);
    return;
  }
  if (W.gated) {
    const Tensor qg = t.qg.slice_rows(0, n), gate = t.gate.slice_rows(0, n);
    const Backend::CopyPair split[] = {{head_half(qg, nh, hd, 0), q.reshape(hd)},       // q [n, n_head * hd]
                                       {head_half(qg, nh, hd, 1), gate.reshape(hd)}};  // gate [n, n_head * hd]
    b.copy_batch(split);
  }
  b.qk_norm_rope(q, k, v, W.q_norm, W.k_norm, s.eps, in.pos, rq, rk, nullptr);
  for (size_t i = 0; i < in.segments.size(); ++i) {           // per sequence: its own cache
    const Segment& g = in.segments[i];
    const Tensor pos = BatchInputs::rows_of(in.pos, g);
    b.kv_store(*caches[i], BatchInputs::rows_of(k, g), BatchInputs::rows_of(v, g), pos);
    b.attention(BatchInputs::rows_of(q, g), *caches[i], pos, s.attn, BatchInputs::rows_of(att, g));
  }
  if (W.gated) b.sigmoid_mul(t.gate.slice_rows(0, n), att, att);
}

// The q (or q + gate), k and v projections of an attention block.
std::vector<Projection> qkv_projections(const AttnWeights& W, AttnScratch& t, int64_t n) {
  return {Projection{W.wq, W.gated ? t.qg.slice_rows(0, n) : t.q.slice_rows(0, n)},
          Projection{W.wk, t.k.slice_rows(0, n)}, Projection{W.wv, t.v.slice_rows(0, n)}};
}

}  // namespace

void attention(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
               std::span<KvCache* const> caches, const Tensor& xn) {
  for (const Projection& p : qkv_projections(W, t, in.n)) b.matmul(p.W, xn, p.y);
  attention_core(b, W, s, t, in, caches);
  b.matmul(W.wo, t.att.slice_rows(0, in.n), xn);              // xn [n, dim]
}

void attention_residual(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
                        std::span<KvCache* const> caches, const Tensor& x, const Tensor& norm, const Tensor& xn) {
  const std::vector<Projection> p = qkv_projections(W, t, in.n);
  b.norm_matmuls(x, norm, s.eps_block, xn, p);               // xn = rms_norm(x) * norm; q, k, v
  attention_core(b, W, s, t, in, caches);
  b.matmul_add(W.wo, t.att.slice_rows(0, in.n), xn, x);      // x += wo . att
}

void attention_kv_rows(Backend& b, const AttnWeights& W, const AttnShape& s, AttnScratch& t, const BatchInputs& in,
                       KvCache& cache, const Tensor& x, const Tensor& norm, const Tensor& xn) {
  const int64_t n = in.n, hd = s.attn.head_dim;
  const Tensor k = t.k.slice_rows(0, n), v = t.v.slice_rows(0, n);
  const Projection p[] = {Projection{W.wk, k}, Projection{W.wv, v}};
  b.norm_matmuls(x, norm, s.eps_block, xn, p);               // xn = rms_norm(x) * norm; k, v
  RopeParams rk = s.rope;
  rk.n_head = s.attn.n_head_kv;
  b.rms_norm(k.reshape(hd), W.k_norm, s.eps, k.reshape(hd));  // qk_norm_rope's k part
  b.rope(k, in.pos, rk);
  b.kv_store(cache, k, v, in.pos);
}

void swiglu_ffn(Backend& b, const FfnWeights& W, const Tensor& x, const Tensor& gate, const Tensor& up,
                const Tensor& out) {
  b.matmul(W.gate, x, gate);                                  // gate [n, n_ff]
  b.matmul(W.up, x, up);                                      // up [n, n_ff]
  b.swiglu(gate, up, gate);
  b.matmul(W.down, gate, out);                                // out [n, dim]
}

void swiglu_ffn_residual(Backend& b, const FfnWeights& W, const Tensor& x, const Tensor& norm, float eps,
                         const Tensor& xn, const Tensor& gate, const Tensor& up) {
  b.norm_swiglu(x, norm, eps, xn, W.gate, W.up, gate, up);    // gate = silu(gate . xn) * (up . xn)
  b.matmul_add(W.down, gate, xn, x);                          // x += down . gate
}

ForwardOutputs output_head(Backend& b, const OutputHead& H, float eps, Workspace& ws, const BatchInputs& in,
                           const Tensor& x, int64_t n_vocab, const ForwardOptions& opt) {
  ForwardOutputs out;
  out.rows = in.rows;
  const auto n_out = static_cast<int64_t>(in.rows.size());
  if (n_out == 0) return out;
  out.hidden = ws.hidden(n_out, x.cols);
  // hidden [n_out, dim] = norm(the chosen rows of x). Where they are consecutive (decode, a
  // verify's rows, a prefill's last row) the norm reads them in place: the values get_rows
  // would copy, so the same bits, one op fewer.
  const int32_t r0 = in.rows.front();
  bool run = true;
  for (int64_t i = 0; i < n_out; ++i) run = run && in.rows[static_cast<size_t>(i)] == r0 + i;
  if (run) {
    b.rms_norm(x.slice_rows(r0, n_out), H.norm, eps, out.hidden);
  } else {
    b.get_rows(x, in.out_rows, out.hidden);
    b.rms_norm(out.hidden, H.norm, eps, out.hidden);
  }
  if (opt.logits) {
    const int64_t first = opt.logits_last ? n_out - 1 : 0;  // logits_last: the last row only
    out.logits = ws.logits(n_out - first, n_vocab);
    b.matmul(H.out, out.hidden.slice_rows(first, n_out - first), out.logits);  // logits [n_out, n_vocab]
  }
  return out;
}

// ---- decode steps as graphs ----

ForwardOutputs StepGraphs::run(Backend& b, const Workspace& ws, const BatchInputs& in, const ForwardOptions& opt,
                               const std::function<ForwardOutputs()>& ops, std::span<const int64_t> extra_key) {
  constexpr int64_t kMaxRows = 8;
  constexpr size_t kMaxEntries = 8;
  if (in.segments.size() != 1 || in.n > kMaxRows) return ops();
  std::vector<int64_t> key = {static_cast<int64_t>(ws.generation()), in.n, opt.logits, opt.logits_last, opt.snapshots,
                              opt.row_exact};
  key.insert(key.end(), in.rows.begin(), in.rows.end());
  key.insert(key.end(), extra_key.begin(), extra_key.end());
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == entries_.end()) {  // first time: eagerly, so that every allocation happens now
    if (entries_.size() >= kMaxEntries) entries_.erase(entries_.begin());
    entries_.push_back(Entry{key, true, nullptr, {}});
    return ops();
  }
  if (!it->recordable) return ops();
  if (!it->graph) {  // second time: record (and run) it
    it->graph = b.record([&] { it->out = ops(); });
    if (!it->graph) it->recordable = false;
    return it->out;
  }
  b.replay(*it->graph);
  return it->out;
}

}  // namespace df::blocks
