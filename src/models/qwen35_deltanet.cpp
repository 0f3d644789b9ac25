// The Gated DeltaNet mixer of the qwen35 / qwen35moe trunks (see qwen35.cpp for the maths),
// shared by both recipes.
#include <vector>

#include "models/qwen35_parts.h"

namespace df::qwen35 {

DeltaNetScratch make_delta_net_scratch(blocks::Workspace& ws, const Hparams& hp) {
  const ModelInfo& m = hp.info;
  const int64_t S = m.ssm_state, Hv = m.ssm_v_heads;
  DeltaNetScratch t;
  if (m.n_layer_recurrent == 0) return t;
  t.qkv = ws.make(hp.conv_dim);
  t.conv_out = ws.make(hp.conv_dim);
  t.z = ws.make(Hv * S);
  t.o = ws.make(Hv * S);
  t.beta = ws.make(Hv);
  t.g = ws.make(Hv);
  return t;
}

namespace {

// The mixer after its projections t.qkv, t.z, t.beta (sigmoid), t.g (log decay) -> t.o
// [n, Hv*S] (normed per head and gated by silu(z)).
void delta_net_core(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
                    const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots) {
  const ModelInfo& m = hp.info;
  const int64_t n = in.n;
  DeltaNetCore a;
  a.qkv = t.qkv.slice_rows(0, n), a.conv_w = W.conv1d, a.conv = t.conv_out.slice_rows(0, n);
  a.z = t.z.slice_rows(0, n), a.beta = t.beta.slice_rows(0, n), a.g = t.g.slice_rows(0, n);
  a.norm = W.ssm_norm, a.o = t.o.slice_rows(0, n);
  a.head_dim = m.ssm_state, a.n_k_heads = m.ssm_k_heads, a.eps = m.rms_eps;
  std::vector<DeltaNetSeq> seqs;  // the segments in batch order, each with its sequence's state
  for (size_t s = 0; s < st.size(); ++s) {
    const blocks::Segment& seg = in.segments[s];
    DeltaNetSeq q;
    q.row0 = seg.row0, q.n = seg.n;
    q.conv_state = st[s]->live.conv[i], q.ssm_state = st[s]->live.ssm[i];
    if (snapshots) q.conv_snap = st[s]->snap.conv[i], q.ssm_snap = st[s]->snap.ssm[i];
    seqs.push_back(q);
  }
  b.delta_net_core(a, seqs);
}

// qkv [n, conv_dim], z [n, Hv*S], beta = sigmoid(.) [n, Hv], g = softplus(. + dt_bias) * a [n, Hv].
std::vector<Projection> projections(const DeltaNetWeights& W, const DeltaNetScratch& t, int64_t n) {
  return {Projection{W.wqkv, t.qkv.slice_rows(0, n)}, Projection{W.wgate, t.z.slice_rows(0, n)},
          Projection{W.ssm_beta, t.beta.slice_rows(0, n), Epilogue::SIGMOID},
          Projection{W.ssm_alpha, t.g.slice_rows(0, n), Epilogue::SOFTPLUS_SCALE, W.dt_bias, W.ssm_a}};
}

}  // namespace

void delta_net(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
               const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots,
               const Tensor& xn) {
  for (const Projection& p : projections(W, t, in.n)) {
    b.matmul(p.W, xn, p.y);
    if (p.epi == Epilogue::SIGMOID) b.unary(UnaryOp::SIGMOID, p.y, p.y);
    if (p.epi == Epilogue::SOFTPLUS_SCALE) b.softplus_scale(p.y, p.bias, p.scale, p.y);  // log decay (<= 0)
  }
  delta_net_core(b, hp, W, t, in, st, i, snapshots);
  b.matmul(W.ssm_out, t.o.slice_rows(0, in.n), xn);           // xn [n, dim]
}

void delta_net_residual(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
                        const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots,
                        const Tensor& x, const Tensor& norm, const Tensor& xn) {
  b.norm_matmuls(x, norm, hp.info.rms_eps, xn, projections(W, t, in.n));
  delta_net_core(b, hp, W, t, in, st, i, snapshots);
  b.matmul_add(W.ssm_out, t.o.slice_rows(0, in.n), xn, x);   // x += ssm_out . o
}

}  // namespace df::qwen35
