// The MoE FFN block (moe_ffn.h), in the op order of llama.cpp's build_moe_ffn and
// qwen35moe's build_layer_ffn, so that each intermediate can be compared with the reference.
#include "models/moe_ffn.h"

#include <variant>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df {
namespace {

// A key holding a number, or an array of one number per layer that must all be equal.
int64_t uniform_key(const gguf::File& f, const std::string& key, int64_t dflt) {
  const gguf::Value* v = f.find(key);
  if (!v) return dflt;
  if (v->type != gguf::ValueType::ARRAY) return static_cast<int64_t>(v->as_u64(key));
  std::vector<int64_t> vals;
  std::visit(
      [&](const auto& vec) {
        using E = typename std::decay_t<decltype(vec)>::value_type;
        if constexpr (std::is_integral_v<E>) {
          for (auto e : vec) vals.push_back(static_cast<int64_t>(e));
        } else {
          throw Error("key '" + key + "' must be an integer or an array of integers");
        }
      },
      v->as_array(key));
  if (vals.empty()) throw Error("key '" + key + "' is an empty array");
  for (auto x : vals)
    if (x != vals[0]) throw Error("key '" + key + "' differs between layers (not supported)");
  return vals[0];
}

}  // namespace

MoeShape read_moe_shape(const gguf::File& f, const ModelInfo& m) {
  const std::string a = m.arch + ".";
  MoeShape e;
  e.n_embd = m.n_embd;
  e.n_expert = uniform_key(f, a + "expert_count", 0);
  e.n_used = uniform_key(f, a + "expert_used_count", 0);
  if (e.n_expert <= 0 || e.n_expert > 512 || e.n_used <= 0 || e.n_used > e.n_expert)
    throw Error(m.arch + ": expert_count must be in [1, 512] and expert_used_count in [1, expert_count]");
  e.n_ff_exp = uniform_key(f, a + "expert_feed_forward_length", m.n_ff / e.n_used);
  e.n_ff_shexp = uniform_key(f, a + "expert_shared_feed_forward_length", m.n_ff);
  if (e.n_ff_exp <= 0 || e.n_ff_shexp <= 0)
    throw Error(m.arch + ": expert_feed_forward_length and expert_shared_feed_forward_length must be positive");
  e.norm_weights = true;
  e.weights_scale = 0.0f;
  return e;
}

MoeFfn load_moe_ffn(WeightLoader& w, const std::string& p, const MoeShape& s) {
  const int64_t dim = s.n_embd, E = s.n_expert, ff = s.n_ff_exp, sh = s.n_ff_shexp;
  MoeFfn f;
  f.router = w.get(p + "ffn_gate_inp.weight", dim, E);
  f.gate_exps = w.get_stack(p + "ffn_gate_exps.weight", dim, ff, E);
  f.up_exps = w.get_stack(p + "ffn_up_exps.weight", dim, ff, E);
  f.down_exps = w.get_stack(p + "ffn_down_exps.weight", ff, dim, E);
  if (sh > 0) {
    f.shexp_gate_inp = w.get(p + "ffn_gate_inp_shexp.weight", dim, 1);
    f.shexp_gate = w.get(p + "ffn_gate_shexp.weight", dim, sh);
    f.shexp_up = w.get(p + "ffn_up_shexp.weight", dim, sh);
    f.shexp_down = w.get(p + "ffn_down_shexp.weight", sh, dim);
  }
  return f;
}

MoeScratch make_moe_scratch(const MoeShape& s, const std::function<Tensor(int64_t cols, GgmlType type)>& make) {
  MoeScratch t;
  const int64_t k = s.n_used;
  t.logits = make(s.n_expert, GgmlType::F32);
  t.ids = make(k, GgmlType::I32);
  t.weights = make(k, GgmlType::F32);
  t.gate = make(k * s.n_ff_exp, GgmlType::F32).reshape(s.n_ff_exp);
  t.up = make(k * s.n_ff_exp, GgmlType::F32).reshape(s.n_ff_exp);
  t.down = make(k * s.n_embd, GgmlType::F32).reshape(s.n_embd);
  if (s.n_ff_shexp > 0) {
    t.sh_gate = make(s.n_ff_shexp, GgmlType::F32);
    t.sh_up = make(s.n_ff_shexp, GgmlType::F32);
    t.sh_out = make(s.n_embd, GgmlType::F32);
    t.sh_g = make(1, GgmlType::F32);
  }
  return t;
}

void moe_ffn_residual(Backend& b, const MoeShape& s, const MoeFfn& f, const MoeScratch& t, const Tensor& x,
                      const Tensor& norm, float eps, const Tensor& xn, const Tensor& out) {
  const int64_t n = xn.rows, k = s.n_used;
  if (n > t.logits.rows) throw Error("moe_ffn: more rows than the scratch holds");
  const bool shared = s.n_ff_shexp > 0;
  const Tensor logits = t.logits.slice_rows(0, n), ids = t.ids.slice_rows(0, n), w = t.weights.slice_rows(0, n);
  const Tensor gate = t.gate.slice_rows(0, n * k), up = t.up.slice_rows(0, n * k), down = t.down.slice_rows(0, n * k);
  const Tensor g = shared ? t.sh_g.slice_rows(0, n) : Tensor{};
  // The router and the shared expert's gate over rms_norm(x) (a fused backend norms x in the
  // launch; the default writes xn): logits [n, E], g = sigmoid(gate_inp . xn) [n, 1].
  const Projection proj[2] = {{f.router, logits}, {f.shexp_gate_inp, g, Epilogue::SIGMOID}};
  b.norm_matmuls(x, norm, eps, xn, std::span<const Projection>(proj, shared ? 2 : 1));
  // Then (Backend::moe_experts_residual's default): xn = rms_norm(x) [n, dim], the experts'
  // input; ids, w [n, k] = top-k; gate [n * k, n_ff_exp] = SwiGLU of the routed experts; down
  // [n * k, dim]; the shared expert sh_gate [n, n_ff_shexp], sh_out [n, dim]; x += the combine.
  MoeExperts m;
  m.gate_exps = f.gate_exps, m.up_exps = f.up_exps, m.down_exps = f.down_exps;
  m.n_expert = s.n_expert, m.normalize = s.norm_weights, m.scale = s.weights_scale;
  m.logits = logits, m.ids = ids, m.weights = w, m.gate = gate, m.up = up, m.down = down, m.out = out;
  if (shared) {
    m.shexp_gate = f.shexp_gate, m.shexp_up = f.shexp_up, m.shexp_down = f.shexp_down, m.sh_g = g;
    m.sh_gate = t.sh_gate.slice_rows(0, n), m.sh_up = t.sh_up.slice_rows(0, n), m.sh_out = t.sh_out.slice_rows(0, n);
  }
  b.moe_experts_residual(m, x, norm, eps, xn);
}

void moe_ffn_forecast(Backend& b, const MoeShape& s, const MoeFfn& f, const MoeScratch& t, const Tensor& x,
                      const Tensor& norm, float eps, const Tensor& xn, bool draft, int64_t block) {
  const int64_t n = x.rows;
  if (n > t.logits.rows) throw Error("moe_ffn: more rows than the scratch holds");
  MoeForecast fc;
  fc.gate_exps = f.gate_exps, fc.up_exps = f.up_exps, fc.down_exps = f.down_exps;
  fc.n_expert = s.n_expert, fc.n_used = s.n_used;
  fc.router = f.router, fc.norm = norm, fc.eps = eps;
  fc.x = x, fc.xn = xn, fc.logits = t.logits.slice_rows(0, n);
  fc.draft = draft;
  fc.block = block;
  b.moe_forecast(fc);
}

uint64_t moe_weight_bytes(const MoeFfn& f) {
  return f.router.nbytes() + f.gate_exps.nbytes() + f.up_exps.nbytes() + f.down_exps.nbytes() +
         f.shexp_gate_inp.nbytes() + f.shexp_gate.nbytes() + f.shexp_up.nbytes() + f.shexp_down.nbytes();
}

uint64_t moe_bytes_per_token(const MoeShape& s, const MoeFfn& f) {
  const uint64_t per_expert = (f.gate_exps.nbytes() + f.up_exps.nbytes() + f.down_exps.nbytes()) /
                              static_cast<uint64_t>(s.n_expert);
  uint64_t bytes = f.router.nbytes() + per_expert * static_cast<uint64_t>(s.n_used);
  if (s.n_ff_shexp > 0)
    bytes += f.shexp_gate_inp.nbytes() + f.shexp_gate.nbytes() + f.shexp_up.nbytes() + f.shexp_down.nbytes();
  return bytes;
}

}  // namespace df
