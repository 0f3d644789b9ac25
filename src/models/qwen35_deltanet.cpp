// The Gated DeltaNet mixer of the qwen35 / qwen35moe trunks (see qwen35.cpp for the maths),
// shared by both recipes.
#include <cmath>

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
  const int64_t n = in.n, S = m.ssm_state, kd = m.ssm_k_heads * S, vd = m.ssm_v_heads * S;
  const Tensor qkv = t.qkv.slice_rows(0, n), conv = t.conv_out.slice_rows(0, n);
  const Tensor z = t.z.slice_rows(0, n), o = t.o.slice_rows(0, n);
  const Tensor beta = t.beta.slice_rows(0, n), g = t.g.slice_rows(0, n);
  for (size_t s = 0; s < st.size(); ++s) {                    // conv [n, conv_dim], per sequence
    const blocks::Segment& seg = in.segments[s];
    b.ssm_conv(blocks::BatchInputs::rows_of(qkv, seg), st[s]->live.conv[i], W.conv1d,
               blocks::BatchInputs::rows_of(conv, seg), snapshots ? st[s]->snap.conv[i] : Tensor{});
  }
  b.unary(UnaryOp::SILU, conv, conv);
  const Tensor q = conv.slice_cols(0, kd);                    // q [n, Hk*S]
  const Tensor k = conv.slice_cols(kd, kd);                   // k [n, Hk*S]
  const Tensor v = conv.slice_cols(2 * kd, vd);               // v [n, Hv*S]
  const Tensor qk = conv.slice_cols(0, 2 * kd);              // q and k normed per head in one call
  b.l2_norm(qk, S, m.rms_eps, qk);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (size_t s = 0; s < st.size(); ++s) {                    // o [n, Hv*S], per sequence
    const blocks::Segment& seg = in.segments[s];
    auto rows = [&](const Tensor& x) { return blocks::BatchInputs::rows_of(x, seg); };
    b.gated_delta_rule(rows(q), rows(k), rows(v), rows(g), rows(beta), st[s]->live.ssm[i], scale, rows(o),
                       snapshots ? st[s]->snap.ssm[i] : Tensor{});
  }
  b.rms_norm(o.reshape(S), W.ssm_norm, m.rms_eps, o.reshape(S));  // per value head
  b.swiglu(z, o, o);                                          // o = silu(z) * o
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
