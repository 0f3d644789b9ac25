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

void delta_net(Backend& b, const Hparams& hp, const DeltaNetWeights& W, const DeltaNetScratch& t,
               const blocks::BatchInputs& in, const std::vector<State*>& st, size_t i, bool snapshots,
               const Tensor& xn) {
  const ModelInfo& m = hp.info;
  const int64_t n = in.n, S = m.ssm_state, kd = m.ssm_k_heads * S, vd = m.ssm_v_heads * S;
  const Tensor qkv = t.qkv.slice_rows(0, n), conv = t.conv_out.slice_rows(0, n);
  const Tensor z = t.z.slice_rows(0, n), o = t.o.slice_rows(0, n);
  const Tensor beta = t.beta.slice_rows(0, n), g = t.g.slice_rows(0, n);
  b.matmul(W.wqkv, xn, qkv);                                  // qkv [n, conv_dim]
  b.matmul(W.wgate, xn, z);                                   // z [n, Hv*S]
  b.matmul(W.ssm_beta, xn, beta);                             // beta [n, Hv]
  b.unary(UnaryOp::SIGMOID, beta, beta);
  b.matmul(W.ssm_alpha, xn, g);                               // g [n, Hv]
  b.softplus_scale(g, W.dt_bias, W.ssm_a, g);                 // log decay (<= 0)
  for (size_t s = 0; s < st.size(); ++s) {                    // conv [n, conv_dim], per sequence
    const blocks::Segment& seg = in.segments[s];
    b.ssm_conv(blocks::BatchInputs::rows_of(qkv, seg), st[s]->live.conv[i], W.conv1d,
               blocks::BatchInputs::rows_of(conv, seg), snapshots ? st[s]->snap.conv[i] : Tensor{});
  }
  b.unary(UnaryOp::SILU, conv, conv);
  const Tensor q = conv.slice_cols(0, kd);                    // q [n, Hk*S]
  const Tensor k = conv.slice_cols(kd, kd);                   // k [n, Hk*S]
  const Tensor v = conv.slice_cols(2 * kd, vd);               // v [n, Hv*S]
  b.l2_norm(q, S, m.rms_eps, q);
  b.l2_norm(k, S, m.rms_eps, k);
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  for (size_t s = 0; s < st.size(); ++s) {                    // o [n, Hv*S], per sequence
    const blocks::Segment& seg = in.segments[s];
    auto rows = [&](const Tensor& x) { return blocks::BatchInputs::rows_of(x, seg); };
    b.gated_delta_rule(rows(q), rows(k), rows(v), rows(g), rows(beta), st[s]->live.ssm[i], scale, rows(o),
                       snapshots ? st[s]->snap.ssm[i] : Tensor{});
  }
  b.rms_norm(o.reshape(S), W.ssm_norm, m.rms_eps, o.reshape(S));  // per value head
  b.swiglu(z, o, o);                                          // o = silu(z) * o
  b.matmul(W.ssm_out, o, xn);                                 // xn [n, dim]
}

}  // namespace df::qwen35
