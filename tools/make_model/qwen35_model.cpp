// df_make_model --arch qwen35 | qwen35moe: a random-weight Qwen3.5 hybrid model with the tensor
// names, shapes and keys of llama.cpp's qwen35 / qwen35moe loaders (src/models/qwen35.cpp,
// qwen35moe.cpp, src/llama-arch.cpp) and the value conventions of its converter
// (conversion/qwen.py): ssm_a holds -exp(A_log), ssm_dt.bias the softplus-inverse of a time
// step, norms hold their final scale, value heads are in tiled order. qwen35moe replaces every
// MLP by routed experts (3-D ffn_{gate,up,down}_exps, an F32 router ffn_gate_inp) and a shared
// expert with its sigmoid gate (ffn_*_shexp, ffn_gate_inp_shexp).
//
// Random values follow make_model.cpp's scheme (same generator, one stream per tensor name keyed
// by the seed, so every --type / --mix of a seed is the same model rounded differently):
// linear weights ~ N(0, 1/sqrt(fan_in)), norms ~ 1 + N(0, noise), embeddings scaled for a
// logit spread of logit_std. Small parameters (conv1d, ssm_a, ssm_dt, norms) are always F32.
#include "qwen35_model.h"
#include "random_weights.h"

#include <cmath>
#include <numbers>
#include <cstring>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "quant/cpu/kernels.h"

namespace df::make_model {
namespace {

GgmlType type_by_name(const std::string& name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto ti = type_info(id);
    if (ti && ti->name == name) {
      if (!ti->supported) throw Error("--mix: type '" + name + "' is not supported by this build");
      return static_cast<GgmlType>(id);
    }
  }
  throw Error("--mix: unknown type '" + name + "'");
}

// "substring=type,..." -> rules; the first rule whose substring occurs in a tensor name wins.
std::vector<std::pair<std::string, GgmlType>> parse_mix(const std::string& spec) {
  std::vector<std::pair<std::string, GgmlType>> rules;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--mix: expected 'substring=type', got '" + item + "'");
    rules.emplace_back(item.substr(0, eq), type_by_name(item.substr(eq + 1)));
  }
  return rules;
}

class Writer35 {
 public:
  Writer35(gguf::Writer& w, uint64_t seed, GgmlType type, std::vector<std::pair<std::string, GgmlType>> mix)
      : w_(w), seed_(seed), type_(type), mix_(std::move(mix)) {}
  bool fast = false;  // Rng::normal_fast for the weight matrices

  // [rows, cols] weight (ne = {cols, rows}) ~ N(0, sigma) in the file's type for `name`; with
  // n_mat > 1 a stack of n_mat such matrices (ne = {cols, rows, n_mat}: MoE experts).
  void matrix(const std::string& name, int64_t cols, int64_t rows, float sigma, int64_t n_mat = 1) {
    matrix_of(type_for(name), name, cols, rows, sigma, n_mat);
  }
  // The same, always F32 (llama.cpp's quantizer keeps the MoE router ffn_gate_inp in F32).
  void matrix_f32(const std::string& name, int64_t cols, int64_t rows, float sigma) {
    matrix_of(GgmlType::F32, name, cols, rows, sigma, 1);
  }

 private:
  void matrix_of(GgmlType t, const std::string& name, int64_t cols, int64_t rows, float sigma, int64_t n_mat) {
    rows *= n_mat;
    if (cols % type_info(t).block_elems != 0)
      throw Error("tensor " + name + ": row length " + std::to_string(cols) + " is not a multiple of the " +
                  std::string(type_name(t)) + " block");
    std::vector<uint8_t> data;
    if (row_pool_ > 0 && rows > row_pool_ && t != GgmlType::F32) {  // --row-pool: rows from a pool
      const std::vector<uint8_t> pool = random_matrix(name_seed(seed_, name), sigma, t, cols, row_pool_, fast);
      const size_t rb = row_bytes(t, cols);
      data.resize(rb * static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(data.data() + rb * static_cast<size_t>(r), pool.data() + rb * static_cast<size_t>((r * 7919) % row_pool_), rb);
    } else {
      data = random_matrix(name_seed(seed_, name), sigma, t, cols, rows, fast);
    }
    std::vector<int64_t> ne = {cols, rows};
    if (n_mat > 1) ne = {cols, rows / n_mat, n_mat};
    w_.add_tensor(name, t, ne, data.data(), data.size());
    n_params_ += cols * rows;
  }

 public:

  // An F32 tensor with values f(rng) (ne as given).
  template <typename F>
  void f32(const std::string& name, const std::vector<int64_t>& ne, F&& f) {
    Rng rng(name_seed(seed_, name));
    int64_t n = 1;
    for (auto d : ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = f(rng);
    w_.add_tensor(name, GgmlType::F32, ne, v.data(), v.size() * sizeof(float));
    n_params_ += n;
  }

  void norm(const std::string& name, int64_t n, float noise) {
    f32(name, {n}, [&](Rng& r) { return 1.0f + noise * r.normal(); });
  }

  int64_t n_params() const { return n_params_; }

 private:
  GgmlType type_for(const std::string& name) const {
    for (const auto& [sub, t] : mix_)
      if (name.find(sub) != std::string::npos) return t;
    return type_;
  }
  gguf::Writer& w_;
  uint64_t seed_;
  GgmlType type_;
  std::vector<std::pair<std::string, GgmlType>> mix_;
  int64_t n_params_ = 0;

 public:
  int64_t row_pool_ = 0;
};

int or_default(int v, int d) { return v > 0 ? v : d; }

}  // namespace

void add_qwen35_flags(CLI::App& app, Qwen35Flags& f) {
  app.add_option("--rot-dims", f.rot_dims, "qwen35: rotary dims per head (default head-dim / 4)");
  app.add_option("--ssm-state", f.ssm_state, "qwen35: delta-rule head size, ssm.state_size (default 64)");
  app.add_option("--ssm-k-heads", f.ssm_k_heads, "qwen35: key heads, ssm.group_count (default 2)");
  app.add_option("--ssm-v-heads", f.ssm_v_heads, "qwen35: value heads, ssm.time_step_rank (default 4)");
  app.add_option("--conv-kernel", f.conv_kernel, "qwen35: ssm.conv_kernel (default 4)");
  app.add_option("--full-attn-interval", f.full_attn_interval, "qwen35: every N-th layer is full attention (default 4)");
  app.add_option("--mtp-layers", f.mtp_layers, "qwen35: MTP (nextn) layers after the trunk");
  app.add_option("--rope-sections", f.rope_sections,
                 "qwen35: rope.dimension_sections, 4 values (default: the rotary pairs over 3 text sections, 4th 0)")
      ->expected(4)
      ->delimiter(',');
  app.add_option("--mix", f.mix, "qwen35: per-tensor types 'substring=type,...' over --type (first match wins)");
  app.add_option("--experts", f.experts, "qwen35moe: expert_count (default 8)");
  app.add_option("--experts-used", f.experts_used, "qwen35moe: experts routed per token (default 2)");
  app.add_option("--expert-ff", f.expert_ff, "qwen35moe: expert FF length (default --ff / --experts-used)");
  app.add_option("--shexp-ff", f.shexp_ff, "qwen35moe: shared expert FF length (default --ff)");
  app.add_option("--router-std", f.router_std, "qwen35moe: standard deviation of the router logits (default 1)");
  app.add_option("--row-pool", f.row_pool,
                 "speed benchmarks of large shapes: quantized matrices repeat N random rows (0: every row random)")
      ->check(CLI::NonNegativeNumber);
}

int64_t write_qwen35(gguf::Writer& w, const std::string& arch, const BaseShape& s, const Qwen35Flags& f,
                     GgmlType type, const Qwen35Scales& sc) {
  const bool moe = arch == "qwen35moe";
  if (!moe && arch != "qwen35") throw Error("write_qwen35: unknown arch '" + arch + "'");
  const int64_t n_embd = s.dim, n_ff = s.ff, hd = s.head_dim;
  const int64_t q_dim = int64_t{s.heads} * hd, kv_dim = int64_t{s.kv_heads} * hd;
  const int64_t rot = or_default(f.rot_dims, s.head_dim / 4);
  const int64_t S = or_default(f.ssm_state, 64), Hk = or_default(f.ssm_k_heads, 2), Hv = or_default(f.ssm_v_heads, 4);
  const int64_t K = or_default(f.conv_kernel, 4), interval = or_default(f.full_attn_interval, 4);
  const int64_t n_mtp = f.mtp_layers;
  if (rot <= 0 || rot % 2 != 0 || rot > hd) throw Error("--rot-dims must be even and at most --head-dim");
  if (Hv % Hk != 0) throw Error("--ssm-v-heads must be a multiple of --ssm-k-heads");
  if (n_mtp < 0) throw Error("--mtp-layers must not be negative");
  const int64_t vd = Hv * S, conv_dim = 2 * Hk * S + vd;
  const int64_t n_exp = or_default(f.experts, 8), n_used = or_default(f.experts_used, 2);
  const int64_t ff_exp = or_default(f.expert_ff, static_cast<int>(n_ff / n_used)), ff_sh = or_default(f.shexp_ff, s.ff);
  const float router_std = f.router_std > 0 ? f.router_std : 1.0f;
  if (moe && (n_used > n_exp || ff_exp <= 0 || n_exp > 512))
    throw Error("--experts-used must be at most --experts (at most 512), and the expert FF length positive");

  const std::string a = arch + ".";
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  w.set_u32(a + "block_count", u32(s.layers + n_mtp));
  if (n_mtp > 0) w.set_u32(a + "nextn_predict_layers", u32(n_mtp));
  w.set_u32(a + "context_length", u32(s.ctx));
  w.set_u32(a + "embedding_length", u32(n_embd));
  w.set_u32(a + "feed_forward_length", u32(n_ff));
  w.set_u32(a + "attention.head_count", u32(s.heads));
  w.set_u32(a + "attention.head_count_kv", u32(s.kv_heads));
  w.set_u32(a + "attention.key_length", u32(hd));
  w.set_u32(a + "attention.value_length", u32(hd));
  w.set_u32(a + "rope.dimension_count", u32(rot));
  // Interleaved M-RoPE sections covering the rot/2 pairs (text: plain NeoX RoPE), as the
  // converter writes [11, 11, 10, 0] for 32 pairs.
  const int32_t pairs = static_cast<int32_t>(rot / 2);
  if (f.rope_sections.empty()) {
    w.set_i32_array(a + "rope.dimension_sections", {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0});
  } else {
    int total = 0;
    for (int v : f.rope_sections) total += v;
    if (total <= 0 || total > hd) throw Error("--rope-sections must sum to between 1 and --head-dim");
    w.set_i32_array(a + "rope.dimension_sections", std::vector<int32_t>(f.rope_sections.begin(), f.rope_sections.end()));
  }
  w.set_f32(a + "rope.freq_base", s.rope_base);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_u32(a + "full_attention_interval", u32(interval));
  w.set_u32(a + "ssm.conv_kernel", u32(K));
  w.set_u32(a + "ssm.state_size", u32(S));
  w.set_u32(a + "ssm.group_count", u32(Hk));
  w.set_u32(a + "ssm.time_step_rank", u32(Hv));
  w.set_u32(a + "ssm.inner_size", u32(vd));
  if (moe) {
    w.set_u32(a + "expert_count", u32(n_exp));
    w.set_u32(a + "expert_used_count", u32(n_used));
    w.set_u32(a + "expert_feed_forward_length", u32(ff_exp));
    w.set_u32(a + "expert_shared_feed_forward_length", u32(ff_sh));
  }

  Writer35 m(w, sc.seed, type, parse_mix(f.mix));
  m.fast = sc.fast_random;
  m.row_pool_ = f.row_pool;
  const float embd_sigma = sc.logit_std / std::sqrt(static_cast<float>(n_embd));
  auto lin = [](int64_t fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); };
  const float noise = sc.norm_noise, gain = sc.resid_gain;
  // Shapes in comments are [rows, cols] = [out, in]; GGUF stores ne = {in, out}.
  m.matrix("token_embd.weight", n_embd, s.vocab, embd_sigma);             // [n_vocab, n_embd]
  auto attention = [&](const std::string& p) {
    m.matrix(p + "attn_q.weight", n_embd, 2 * q_dim, lin(n_embd));        // [heads * 2 * hd]: query | gate per head
    m.matrix(p + "attn_k.weight", n_embd, kv_dim, lin(n_embd));           // [kv_heads * hd, n_embd]
    m.matrix(p + "attn_v.weight", n_embd, kv_dim, lin(n_embd));           // [kv_heads * hd, n_embd]
    m.norm(p + "attn_q_norm.weight", hd, noise);                          // [hd]
    m.norm(p + "attn_k_norm.weight", hd, noise);                          // [hd]
    m.matrix(p + "attn_output.weight", q_dim, n_embd, gain * lin(q_dim)); // [n_embd, heads * hd]
  };
  auto mlp = [&](const std::string& p) {
    m.norm(p + "post_attention_norm.weight", n_embd, noise);              // [n_embd]
    if (moe) {  // llama.cpp load_block_trunk: routed experts + shared expert
      m.matrix_f32(p + "ffn_gate_inp.weight", n_embd, n_exp, router_std * lin(n_embd));  // [n_exp, n_embd]
      m.matrix(p + "ffn_gate_exps.weight", n_embd, ff_exp, lin(n_embd), n_exp);          // [n_exp, ff_exp, n_embd]
      m.matrix(p + "ffn_up_exps.weight", n_embd, ff_exp, lin(n_embd), n_exp);            // [n_exp, ff_exp, n_embd]
      m.matrix(p + "ffn_down_exps.weight", ff_exp, n_embd, gain * lin(ff_exp), n_exp);   // [n_exp, n_embd, ff_exp]
      m.f32(p + "ffn_gate_inp_shexp.weight", {n_embd}, [&](Rng& r) { return lin(n_embd) * r.normal(); });  // [n_embd]
      m.matrix(p + "ffn_gate_shexp.weight", n_embd, ff_sh, lin(n_embd));                 // [ff_sh, n_embd]
      m.matrix(p + "ffn_up_shexp.weight", n_embd, ff_sh, lin(n_embd));                   // [ff_sh, n_embd]
      m.matrix(p + "ffn_down_shexp.weight", ff_sh, n_embd, gain * lin(ff_sh));           // [n_embd, ff_sh]
      return;
    }
    m.matrix(p + "ffn_gate.weight", n_embd, n_ff, lin(n_embd));           // [n_ff, n_embd]
    m.matrix(p + "ffn_up.weight", n_embd, n_ff, lin(n_embd));             // [n_ff, n_embd]
    m.matrix(p + "ffn_down.weight", n_ff, n_embd, gain * lin(n_ff));      // [n_embd, n_ff]
  };
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.norm(p + "attn_norm.weight", n_embd, noise);                        // [n_embd]
    if ((l + 1) % interval == 0) {
      attention(p);
    } else {
      m.matrix(p + "attn_qkv.weight", n_embd, conv_dim, lin(n_embd));     // [2*Hk*S + Hv*S, n_embd]
      m.matrix(p + "attn_gate.weight", n_embd, vd, lin(n_embd));          // [Hv*S, n_embd]
      m.f32(p + "ssm_conv1d.weight", {K, conv_dim},                       // [conv_dim, K]
            [&](Rng& r) { return r.normal() / std::sqrt(static_cast<float>(K)); });
      m.f32(p + "ssm_dt.bias", {Hv}, [](Rng& r) {                         // [Hv] softplus^-1(dt)
        const double dt = std::exp(std::log(1e-3) + r.uniform() * (std::log(1e-1) - std::log(1e-3)));
        return static_cast<float>(std::log(std::expm1(dt)));
      });
      m.f32(p + "ssm_a", {Hv}, [](Rng& r) {                               // [Hv] -exp(A_log), A in [1, 16]
        return static_cast<float>(-(1.0 + 15.0 * r.uniform()));
      });
      m.matrix(p + "ssm_beta.weight", n_embd, Hv, lin(n_embd));           // [Hv, n_embd]
      m.matrix(p + "ssm_alpha.weight", n_embd, Hv, lin(n_embd));          // [Hv, n_embd]
      m.norm(p + "ssm_norm.weight", S, noise);                            // [S]
      m.matrix(p + "ssm_out.weight", vd, n_embd, gain * lin(vd));         // [n_embd, Hv*S]
    }
    mlp(p);
  }
  for (int64_t l = s.layers; l < s.layers + n_mtp; ++l) {  // MTP blocks (llama.cpp load_block_mtp)
    const std::string p = "blk." + std::to_string(l) + ".";
    m.norm(p + "attn_norm.weight", n_embd, noise);
    attention(p);
    mlp(p);
    m.matrix(p + "nextn.eh_proj.weight", 2 * n_embd, n_embd, lin(2 * n_embd));  // [n_embd, 2 * n_embd]
    m.norm(p + "nextn.enorm.weight", n_embd, noise);
    m.norm(p + "nextn.hnorm.weight", n_embd, noise);
    m.norm(p + "nextn.shared_head_norm.weight", n_embd, noise);
  }
  m.norm("output_norm.weight", n_embd, noise);                            // [n_embd]
  if (!s.tied) m.matrix("output.weight", n_embd, s.vocab, embd_sigma);    // [n_vocab, n_embd]
  return m.n_params();
}

}  // namespace df::make_model
