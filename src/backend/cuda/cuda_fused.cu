// The CUDA backend's fused ops (backend.h "fused ops"): the decode step's small kernels folded
// into the matvec launches (matvec/mv_fuse.cuh) and one kernel for the attention heads' per-token
// work (ops/qk_norm_rope.cuh), or that work inside the decode attention launch
// (qk_norm_rope_attention, ops/attention_gqa.cuh). Each falls back to Backend's unfused default where a fusion
// does not apply (more than 8 rows, strided tensors, mixed weight types, --no-fuse).
//
// Row exactness: whether a launch fuses the norm depends on the type, width and row count, so
// the fallback norms with the one-warp-per-row kernel in the prologue's order, and the
// elementwise epilogues share their device functions with the elementwise kernels: row r of
// an n-row call has the same bits for every n <= 8 whichever path is taken.
#include <cmath>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops/attention_gqa.cuh"
#include "backend/cuda/ops/elementwise.cuh"
#include "backend/cuda/ops/qk_norm_rope.cuh"
#include "backend/cuda/ops/rms_norm.cuh"
#include "common/error.h"

namespace df::cuda {
namespace {

bool dense_f32(const Tensor& t) { return t.type == GgmlType::F32 && t.stride == static_cast<size_t>(t.cols) * 4; }
float* fp(const Tensor& t) { return static_cast<float*>(t.data); }
int64_t fstride(const Tensor& t) { return static_cast<int64_t>(t.stride / sizeof(float)); }

int epi_code(Epilogue e) {
  switch (e) {
    case Epilogue::NONE: return 0;
    case Epilogue::SIGMOID: return 2;
    case Epilogue::SOFTPLUS_SCALE: return 3;
  }
  return 0;
}

}  // namespace

void CudaBackend::norm_matmuls(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn,
                               std::span<const Projection> proj) {
  bool ok = fuse_ && x.rows >= 1 && x.rows <= cudamv::kMaxRows && dense_f32(x) && dense_f32(norm) &&
            norm.cols == x.cols && dense_f32(xn) && xn.rows == x.rows && xn.cols == x.cols;
  std::vector<const cudamv::PackedWeight*> P;
  for (const Projection& p : proj) {
    const cudamv::PackedWeight* w = find_packed(p.W);
    ok = ok && w && p.W.cols == x.cols && dense_f32(p.y) && p.y.rows == x.rows && p.y.cols == p.W.rows;
    if (p.epi == Epilogue::SOFTPLUS_SCALE)
      ok = ok && dense_f32(p.bias) && dense_f32(p.scale) && p.bias.cols == p.W.rows && p.scale.cols == p.W.rows;
    P.push_back(w);
  }
  uint64_t bytes = 0;
  for (const cudamv::PackedWeight* w : P) bytes += w ? w->bytes : 0;
  OpScope ps(prof_.get(), "norm_matmuls", bytes, [&] {
    std::string r;
    for (const cudamv::PackedWeight* w : P) {
      if (!r.empty()) r.push_back('+');
      r.append(w ? std::to_string(w->rows) : std::string("?"));
    }
    const std::string t = P.empty() || !P[0] ? std::string("?") : std::string(type_name(P[0]->type));
    return t + " " + r + "x" + std::to_string(x.cols);
  });
  if (!ok) {
    Backend::norm_matmuls(x, norm, eps, xn, proj);
    return;
  }
  ctx_->make_current();
  const int n = static_cast<int>(x.rows);
  bool normed = false;  // xn written (a launch that could not fuse the norm)
  for (size_t i = 0; i < proj.size();) {
    // A group: up to three consecutive projections of one type and layout.
    size_t e = i + 1;
    while (e < proj.size() && e - i < 3 && P[e]->type == P[i]->type && P[e]->q_row_bytes == P[i]->q_row_bytes &&
           P[e]->m_row_bytes == P[i]->m_row_bytes)
      ++e;
    cudamv::MatvecFusion f;
    for (size_t j = i; j < e; ++j) {
      const size_t g = j - i;
      if (g > 0) f.more[g - 1] = P[j], f.y_more[g - 1] = fp(proj[j].y);
      f.epi[g] = epi_code(proj[j].epi);
      f.bias[g] = proj[j].bias.empty() ? nullptr : fp(proj[j].bias);
      f.scale[g] = proj[j].scale.empty() ? nullptr : fp(proj[j].scale);
    }
    bool done = false;
    if (!normed) {
      f.norm_w = fp(norm), f.eps = eps;
      f.float_norm = opt_.float_norm_prologue;  // a float router (qwen35moe): the norm in its prologue
      done = cudamv::matvec_fused(*P[i], fp(x), fp(proj[i].y), n, f, ctx_->stream());
      f.norm_w = nullptr;
    }
    if (!done) {
      if (!normed)
        launch_rms_norm_rows(fp(x), fstride(x), fp(norm), eps, fp(xn), fstride(xn), x.rows, x.cols, ctx_->stream(),
                             small_pdl_);
      normed = true;
      if (!cudamv::matvec_fused(*P[i], fp(xn), fp(proj[i].y), n, f, ctx_->stream()))
        throw Error("cuda backend: norm_matmuls: a matvec without a norm did not launch");
    }
    i = e;
  }
}

void CudaBackend::norm_swiglu(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn, const Tensor& Wg,
                              const Tensor& Wu, const Tensor& gate, const Tensor& up) {
  const cudamv::PackedWeight* G = find_packed(Wg);
  const cudamv::PackedWeight* U = find_packed(Wu);
  const bool ok = fuse_ && G && U && G->type == U->type && G->q_row_bytes == U->q_row_bytes &&
                  G->m_row_bytes == U->m_row_bytes && G->rows == U->rows && Wg.cols == x.cols &&
                  x.rows >= 1 && x.rows <= cudamv::kMaxRows && dense_f32(x) && dense_f32(norm) &&
                  norm.cols == x.cols && dense_f32(xn) && dense_f32(gate) && dense_f32(up) &&
                  gate.rows == x.rows && up.rows == x.rows && gate.cols == Wg.rows && up.cols == Wg.rows;
  OpScope ps(prof_.get(), "norm_swiglu", (G ? G->bytes : 0) + (U ? U->bytes : 0),
             [&] { return G ? "2x " + weight_shape(*G) : std::string("?"); });
  if (!ok) {
    Backend::norm_swiglu(x, norm, eps, xn, Wg, Wu, gate, up);
    return;
  }
  ctx_->make_current();
  const int n = static_cast<int>(x.rows);
  cudamv::MatvecFusion f;
  f.more[0] = U;
  f.swiglu = true;
  f.norm_w = fp(norm), f.eps = eps;
  if (cudamv::matvec_fused(*G, fp(x), fp(gate), n, f, ctx_->stream())) return;  // one launch
  // Not in one launch (n > 2: one row per warp): gate and up in one launch, then the
  // elementwise SwiGLU (the epilogue's function: the same bits).
  f.swiglu = false;
  f.y_more[0] = fp(up);
  const float* in = fp(x);
  if (!cudamv::matvec_fused(*G, in, fp(gate), n, f, ctx_->stream())) {
    launch_rms_norm_rows(fp(x), fstride(x), fp(norm), eps, fp(xn), fstride(xn), x.rows, x.cols, ctx_->stream(),
                         small_pdl_);
    f.norm_w = nullptr;
    if (!cudamv::matvec_fused(*G, fp(xn), fp(gate), n, f, ctx_->stream()))
      throw Error("cuda backend: norm_swiglu: a matvec without a norm did not launch");
  }
  launch_swiglu({fp(gate), fstride(gate)}, {fp(up), fstride(up)}, {fp(gate), fstride(gate)}, gate.rows, gate.cols,
                ctx_->stream(), small_pdl_);
}

void CudaBackend::matmul_add(const Tensor& W, const Tensor& x, const Tensor& tmp, const Tensor& acc) {
  const cudamv::PackedWeight* P = find_packed(W);
  OpScope ps(prof_.get(), "matmul_add", P ? P->bytes : 0, [&] { return P ? weight_shape(*P) : std::string("?"); });
  if (!fuse_ || !P || x.rows < 1 || x.rows > cudamv::kMaxRows || !dense_f32(x) || !dense_f32(acc) ||
      W.cols != x.cols || acc.rows != x.rows || acc.cols != W.rows) {
    Backend::matmul_add(W, x, tmp, acc);
    return;
  }
  ctx_->make_current();
  cudamv::MatvecFusion f;
  f.epi[0] = 1;  // acc += W x
  if (!cudamv::matvec_fused(*P, fp(x), fp(acc), static_cast<int>(x.rows), f, ctx_->stream()))
    throw Error("cuda backend: matmul_add did not launch");
}

namespace {

// Does qk_norm_rope's kernel apply (F32 dense rows, one head size, the same rope for q and k,
// an F16 cache of k's width when given)?
bool qk_fusable(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                const Tensor& pos, const RopeParams& rq, const RopeParams& rk, const KvCache* cache) {
  const int64_t hd = rq.head_dim;
  bool ok = q.type == GgmlType::F32 && k.type == GgmlType::F32 && v.type == GgmlType::F32 &&
            hd == rk.head_dim && hd <= kQkMaxHeadDim && rq.n_rot == rk.n_rot && rq.n_rot <= hd &&
            rq.n_rot % 2 == 0 && rq.n_rot > 0 && rq.freq_base == rk.freq_base &&
            q.cols == rq.n_head * hd && k.cols == rk.n_head * hd && v.cols == k.cols && k.rows == q.rows &&
            v.rows == q.rows && dense_f32(q_norm) && dense_f32(k_norm) && q_norm.cols == hd &&
            k_norm.cols == hd && pos.type == GgmlType::I32 && pos.rows == q.rows &&
            pos.stride == sizeof(int32_t) && (!cache || (cache->type == GgmlType::F16 && cache->kv_dim == k.cols));
  for (int i = 0; i < 4; ++i) ok = ok && rq.sections[i] == rk.sections[i];
  return ok;
}

RopeArgs rope_args(const RopeParams& rq) {
  RopeArgs r;
  r.head_dim = rq.head_dim;
  r.n_rot = rq.n_rot;
  r.theta_scale = std::pow(rq.freq_base, -2.0f / static_cast<float>(rq.n_rot));  // as rope()
  for (int i = 0; i < 4; ++i) r.sections[i] = rq.sections[i];
  return r;
}

}  // namespace

void CudaBackend::qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                               const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                               const RopeParams& rk, KvCache* cache) {
  OpScope ps(prof_.get(), "qk_norm_rope");
  if (!fuse_ || !qk_fusable(q, k, v, q_norm, k_norm, pos, rq, rk, cache)) {
    Backend::qk_norm_rope(q, k, v, q_norm, k_norm, eps, pos, rq, rk, cache);
    return;
  }
  ctx_->make_current();
  QkNormRopeArgs a;
  a.q = fp(q), a.q_stride = fstride(q);
  a.k = fp(k), a.k_stride = fstride(k);
  a.v = fp(v), a.v_stride = fstride(v);
  a.q_norm = fp(q_norm), a.k_norm = fp(k_norm), a.eps = eps;
  a.n_head = rq.n_head, a.n_head_kv = rk.n_head;
  a.rope = rope_args(rq);
  a.pos = static_cast<const int32_t*>(pos.data);
  if (cache) {
    a.K = static_cast<__half*>(cache->k.data);
    a.V = static_cast<__half*>(cache->v.data);
    a.kv_dim = cache->kv_dim;
  }
  launch_qk_norm_rope(a, q.rows, ctx_->stream(), small_pdl_);
}

bool CudaBackend::fused_attention(const Tensor& q, const Tensor* qg, const Tensor& k, const Tensor& v,
                                  const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& pos,
                                  const RopeParams& rq, const RopeParams& rk, KvCache& cache,
                                  const AttentionParams& p, const Tensor& out) {
  AttnArgs a;
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.head_dim = p.head_dim;
  a.scale = p.scale;
  a.n_ctx = cache.n_ctx;
  const bool ok = fuse_ && fuse_qk_attn_ && !attn_v1_ && q.rows >= 1 && q.rows <= kGqaFuseMaxRows &&
                  qk_fusable(q, k, v, q_norm, k_norm, pos, rq, rk, &cache) && rq.head_dim == p.head_dim &&
                  rq.n_head == p.n_head && rk.n_head == p.n_head_kv && attention_gqa_supported(a) &&
                  dense_f32(out) && out.rows == q.rows && out.cols == q.cols &&
                  ((reinterpret_cast<uintptr_t>(cache.k.data) | reinterpret_cast<uintptr_t>(cache.v.data)) & 15u) == 0 &&
                  cache.kv_dim % 8 == 0 &&
                  (!qg || (fuse_attn_gate_ && qg->type == GgmlType::F32 && qg->rows == q.rows &&
                           qg->cols == 2 * q.cols && fstride(*qg) >= qg->cols));
  if (!ok) return false;
  OpScope ps(prof_.get(), qg ? "gated_attention" : "qk_norm_rope_attention");
  ctx_->make_current();
  GqaFuse f;
  f.k = fp(k), f.k_stride = fstride(k);
  f.v = fp(v), f.v_stride = fstride(v);
  f.q_norm = fp(q_norm), f.k_norm = fp(k_norm), f.eps = eps;
  f.rope = rope_args(rq);
  f.K = static_cast<__half*>(cache.k.data);
  f.V = static_cast<__half*>(cache.v.data);
  const float* qp = fp(q);
  int64_t qs = fstride(q);
  if (qg) {  // the query heads and gates read from the [query | gate] projection in place
    qp = fp(*qg), qs = fstride(*qg);
    f.q_head_stride = 2 * p.head_dim;
    f.gate = qp + p.head_dim;
  }
  float* scratch = static_cast<float*>(ctx_->scratch(attention_scratch_floats(q.rows, a) * sizeof(float) + 16));
  int32_t* counters = lean_ ? ctx_->counters(static_cast<size_t>(attention_counters(q.rows, a))) : nullptr;
  launch_attention_gqa(qp, qs, q.rows, f.K, f.V, cache.kv_dim, static_cast<const int32_t*>(pos.data), 0, a, scratch,
                       fp(out), fstride(out), ctx_->stream(), counters, small_pdl_, &f, attn_wide_);
  return true;
}

void CudaBackend::qk_norm_rope_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                         const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                                         const RopeParams& rk, KvCache& cache, const AttentionParams& p,
                                         const Tensor& out) {
  if (!fused_attention(q, nullptr, k, v, q_norm, k_norm, eps, pos, rq, rk, cache, p, out))
    Backend::qk_norm_rope_attention(q, k, v, q_norm, k_norm, eps, pos, rq, rk, cache, p, out);
}

void CudaBackend::gated_qk_norm_rope_attention(const Tensor& qg, const Tensor& q, const Tensor& gate,
                                               const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                               const Tensor& k_norm, float eps, const Tensor& pos,
                                               const RopeParams& rq, const RopeParams& rk, KvCache& cache,
                                               const AttentionParams& p, const Tensor& out) {
  if (!fused_attention(q, &qg, k, v, q_norm, k_norm, eps, pos, rq, rk, cache, p, out))
    Backend::gated_qk_norm_rope_attention(qg, q, gate, k, v, q_norm, k_norm, eps, pos, rq, rk, cache, p, out);
}

}  // namespace df::cuda
