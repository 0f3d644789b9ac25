#include "backend/backend.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/error.h"

namespace df {

Tensor Tensor::slice_cols(int64_t c0, int64_t n) const {
  if (type_info(type).block_elems != 1) throw Error("column slice of a block-quantized tensor");
  if (c0 < 0 || n <= 0 || c0 + n > cols) throw Error("column slice out of range");
  Tensor t = *this;
  t.data = static_cast<uint8_t*>(data) + row_bytes(type, c0);
  t.cols = n;
  return t;
}

Tensor Tensor::reshape(int64_t new_cols) const {
  const size_t dense = row_bytes(type, cols);
  if (stride != dense) throw Error("reshape of a strided tensor");
  const int64_t total = cols * rows;
  if (new_cols <= 0 || total % new_cols != 0) throw Error("reshape to incompatible row size");
  Tensor t = *this;
  t.cols = new_cols;
  t.rows = total / new_cols;
  t.stride = row_bytes(type, new_cols);
  return t;
}

void Backend::check_moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared,
                                const Tensor& gate, const Tensor& out) {
  const int64_t n = out.rows, d = out.cols, k = weights.cols;
  if (experts.type != GgmlType::F32 || weights.type != GgmlType::F32 || out.type != GgmlType::F32)
    throw Error("moe_combine types");
  if (!(weights.rows == n && experts.rows == n * k && experts.cols == d && k >= 1)) throw Error("moe_combine shapes");
  if (shared.data && !(shared.type == GgmlType::F32 && gate.type == GgmlType::F32 && shared.rows == n &&
                       shared.cols == d && gate.rows == n && gate.cols == 1))
    throw Error("moe_combine shared expert shapes (shared [n, d], gate [n, 1])");
}

Tensor alloc_tensor(Backend& b, GgmlType type, int64_t cols, int64_t rows,
                    std::vector<std::shared_ptr<Buffer>>& owner) {
  Tensor t;
  t.type = type;
  t.cols = cols;
  t.rows = rows;
  t.stride = row_bytes(type, cols);
  auto buf = b.alloc(t.nbytes());
  t.data = buf->data();
  owner.push_back(std::move(buf));
  return t;
}

Tensor Backend::weight_slots(const Tensor& W, int64_t rows, const void* host_rows,
                             std::vector<std::shared_ptr<Buffer>>& owner) {
  Tensor S = alloc_tensor(*this, W.type, W.cols, rows, owner);
  upload(S, host_rows, S.nbytes());
  return S;
}

namespace {

// Backend::host_reader's default: the copy is made in start().
class CopyingReader final : public HostReader {
 public:
  CopyingReader(Backend& b, size_t bytes) : b_(b), bytes_(bytes) {}
  void start(const Tensor& src) override {
    if (src.nbytes() < bytes_) throw Error("host_reader: the tensor is smaller than the reader");
    b_.download(src, host_.data(), bytes_);
  }
  const void* wait() override { return host_.data(); }

 private:
  Backend& b_;
  size_t bytes_;
  std::vector<uint8_t> host_ = std::vector<uint8_t>(bytes_);
};

}  // namespace

std::unique_ptr<HostReader> Backend::host_reader(size_t bytes) { return std::make_unique<CopyingReader>(*this, bytes); }

// ---- the fused ops' unfused defaults ----

void Backend::copy_batch(std::span<const CopyPair> pairs) {
  for (const CopyPair& p : pairs) copy(p.src, p.dst);
}

void Backend::norm_matmuls(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn,
                           std::span<const Projection> proj) {
  rms_norm(x, norm, eps, xn);
  for (const Projection& p : proj) {
    matmul(p.W, xn, p.y);
    if (p.epi == Epilogue::SIGMOID) unary(UnaryOp::SIGMOID, p.y, p.y);
    if (p.epi == Epilogue::SOFTPLUS_SCALE) softplus_scale(p.y, p.bias, p.scale, p.y);
  }
}

void Backend::norm_swiglu(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn, const Tensor& Wg,
                          const Tensor& Wu, const Tensor& gate, const Tensor& up) {
  rms_norm(x, norm, eps, xn);
  matmul(Wg, xn, gate);
  matmul(Wu, xn, up);
  swiglu(gate, up, gate);
}

void Backend::matmul_id_swiglu(const Tensor& Wg, const Tensor& Wu, int64_t n_expert, const Tensor& x, const Tensor& ids,
                               const Tensor& gate, const Tensor& up) {
  matmul_id(Wu, n_expert, x, ids, up);
  matmul_id(Wg, n_expert, x, ids, gate);
  swiglu(gate, up, gate);
}

void Backend::moe_combine_add(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                              const Tensor& out, const Tensor& x) {
  moe_combine(experts, weights, shared, gate, out);
  add(x, out);
}

void Backend::moe_experts_residual(const MoeExperts& m, const Tensor& x, const Tensor& norm, float eps,
                                   const Tensor& xn) {
  rms_norm(x, norm, eps, xn);
  moe_route(m.logits, m.normalize, m.scale, m.ids, m.weights);
  moe_experts_routed(m);
  matmul_id_swiglu(m.gate_exps, m.up_exps, m.n_expert, xn, m.ids, m.gate, m.up);
  matmul_id(m.down_exps, m.n_expert, m.gate, m.ids, m.down);
  if (!m.shexp_gate.data) {
    moe_combine_add(m.down, m.weights, Tensor{}, Tensor{}, m.out, x);
    return;
  }
  norm_swiglu(x, norm, eps, xn, m.shexp_gate, m.shexp_up, m.sh_gate, m.sh_up);
  matmul(m.shexp_down, m.sh_gate, m.sh_out);
  moe_combine_add(m.down, m.weights, m.sh_out, m.sh_g, m.out, x);
}

void Backend::matmul_add(const Tensor& W, const Tensor& x, const Tensor& tmp, const Tensor& acc) {
  matmul(W, x, tmp);
  add(acc, tmp);
}

void Backend::qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                           const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                           const RopeParams& rk, KvCache* cache) {
  const int64_t hd = rq.head_dim;
  rms_norm(q.reshape(hd), q_norm, eps, q.reshape(hd));
  rms_norm(k.reshape(hd), k_norm, eps, k.reshape(hd));
  rope(q, pos, rq);
  rope(k, pos, rk);
  if (cache) kv_store(*cache, k, v, pos);
}

void Backend::qk_norm_rope_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                     const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                                     const RopeParams& rk, KvCache& cache, const AttentionParams& p,
                                     const Tensor& out) {
  qk_norm_rope(q, k, v, q_norm, k_norm, eps, pos, rq, rk, &cache);
  attention(q, cache, pos, p, out);
}

Tensor head_half(const Tensor& qg, int64_t n_head, int64_t hd, int64_t part) {
  Tensor t = qg;
  t.data = static_cast<uint8_t*>(qg.data) + static_cast<size_t>(part * hd) * sizeof(float);
  t.cols = hd;
  t.rows = qg.rows * n_head;
  t.stride = static_cast<size_t>(2 * hd) * sizeof(float);
  return t;
}

void Backend::gated_qk_norm_rope_attention(const Tensor& qg, const Tensor& q, const Tensor& gate, const Tensor& k,
                                           const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                                           const Tensor& pos, const RopeParams& rq, const RopeParams& rk,
                                           KvCache& cache, const AttentionParams& p, const Tensor& out) {
  const int64_t hd = p.head_dim, nh = p.n_head;
  const CopyPair split[] = {{head_half(qg, nh, hd, 0), q.reshape(hd)},       // q [n, n_head * hd]
                            {head_half(qg, nh, hd, 1), gate.reshape(hd)}};  // gate [n, n_head * hd]
  copy_batch(split);
  qk_norm_rope_attention(q, k, v, q_norm, k_norm, eps, pos, rq, rk, cache, p, out);
  sigmoid_mul(gate, out, out);
}


void Backend::delta_net_core(const DeltaNetCore& a, std::span<const DeltaNetSeq> seqs) {
  const int64_t d = a.head_dim, kd = a.n_k_heads * d, vd = a.o.cols;
  auto rows = [](const Tensor& x, const DeltaNetSeq& s) { return x.slice_rows(s.row0, s.n); };
  for (const DeltaNetSeq& s : seqs) ssm_conv(rows(a.qkv, s), s.conv_state, a.conv_w, rows(a.conv, s), s.conv_snap);
  unary(UnaryOp::SILU, a.conv, a.conv);
  const Tensor q = a.conv.slice_cols(0, kd), k = a.conv.slice_cols(kd, kd), v = a.conv.slice_cols(2 * kd, vd);
  const Tensor qk = a.conv.slice_cols(0, 2 * kd);
  l2_norm(qk, d, a.eps, qk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (const DeltaNetSeq& s : seqs)
    gated_delta_rule(rows(q, s), rows(k, s), rows(v, s), rows(a.g, s), rows(a.beta, s), s.ssm_state, scale,
                     rows(a.o, s), s.ssm_snap);
  rms_norm(a.o.reshape(d), a.norm, a.eps, a.o.reshape(d));  // per value head
  swiglu(a.z, a.o, a.o);                                    // o = silu(z) * o
}

}  // namespace df
