// Every backend op on every backend under test against the reference backend (CPU scalar),
// through the Backend interface only (backend_op_harness.h). Budgets are ggml
// test-backend-ops' defaults: NMSE 1e-7 for elementwise, norm, rope and recurrent ops, 5e-4
// for matrix products and attention (other summation orders and SIMD exp), and the same bits
// for data movement (get_rows, copy, kv_store through attention of one key), argmax and the
// MoE router's choice of experts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend_op_harness.h"
#include "op_test_util.h"

namespace df {
namespace {

using optest::DeviceData;
using optest::OpCase;
using optest::nerr;
using optest::positions;
using optest::randn;

constexpr double kElem = 1e-7, kMatmul = 5e-4;


std::vector<OpCase> make_cases() {
  std::vector<OpCase> cases;
  // ---- data movement ----
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K}) {
    cases.push_back({"get_rows_" + std::string(type_name(t)), 0.0, [t](Backend& b, DeviceData& d) {
                       const int64_t k = 256, vocab = 11;
                       const Tensor table = d.weight(t, randn(static_cast<size_t>(k * vocab), 1), k);
                       const Tensor ids = d.i32({3, 0, 10, 3, 7});
                       const Tensor out = d.zeros(k, 5);
                       b.get_rows(table, ids, out);
                       return d.read(out);
                     }});
  }
  cases.push_back({"copy_add", 0.0, [](Backend& b, DeviceData& d) {
                     const Tensor x = d.f32(randn(96 * 7, 2), 96), y = d.f32(randn(96 * 7, 3), 96), z = d.zeros(96, 7);
                     b.copy(x, z);
                     b.add(z, y);
                     return d.read(z);
                   }});
  cases.push_back({"argmax_ties", 0.0, [](Backend& b, DeviceData& d) {
                     auto v = randn(4 * 1000, 4);
                     v[17] = v[900] = 50.0f;               // row 0: tie, the lower index wins
                     v[1000 + 999] = 60.0f;                // row 1: the last column
                     for (int i = 0; i < 1000; ++i) v[2000 + i] = -1.0f;  // row 2: all equal -> 0
                     const Tensor l = d.f32(v, 1000), out = d.zeros(1, 4, GgmlType::I32);
                     b.argmax(l, out);
                     return d.read_i32(out);
                   }});
  // ---- norms and elementwise ----
  cases.push_back({"rms_norm", kElem, [](Backend& b, DeviceData& d) {
                     const Tensor x = d.f32(randn(384 * 9, 5, 3.0f), 384), w = d.f32(randn(384, 6), 384);
                     const Tensor y = d.zeros(384, 9);
                     b.rms_norm(x, w, 1e-6f, y);
                     return d.read(y);
                   }});
  cases.push_back({"swiglu", kElem, [](Backend& b, DeviceData& d) {
                     const Tensor g = d.f32(randn(300 * 4, 7, 2.0f), 300), u = d.f32(randn(300 * 4, 8), 300);
                     const Tensor o = d.zeros(300, 4);
                     b.swiglu(g, u, o);
                     return d.read(o);
                   }});
  for (UnaryOp op : {UnaryOp::SILU, UnaryOp::SIGMOID, UnaryOp::SOFTPLUS}) {
    cases.push_back({"unary_" + std::to_string(static_cast<int>(op)), kElem, [op](Backend& b, DeviceData& d) {
                       const Tensor x = d.f32(randn(77 * 5, 9, 4.0f), 77), y = d.zeros(77, 5);
                       b.unary(op, x, y);
                       return d.read(y);
                     }});
  }
  cases.push_back({"gates", kElem, [](Backend& b, DeviceData& d) {
                     const Tensor g = d.f32(randn(64 * 3, 10, 3.0f), 64), x = d.f32(randn(64 * 3, 11), 64);
                     const Tensor o = d.zeros(64, 3), sp = d.zeros(16, 3);
                     b.sigmoid_mul(g, x, o);
                     b.softplus_scale(d.f32(randn(48, 12, 5.0f), 16), d.f32(randn(16, 13), 16), d.f32(randn(16, 14), 16), sp);
                     auto out = d.read(o), s = d.read(sp);
                     out.insert(out.end(), s.begin(), s.end());
                     return out;
                   }});
  cases.push_back({"l2_norm", kElem, [](Backend& b, DeviceData& d) {
                     const Tensor x = d.f32(randn(128 * 6, 15, 2.0f), 128), y = d.zeros(128, 6);
                     b.l2_norm(x, 32, 1e-6f, y);
                     return d.read(y);
                   }});
  // ---- matrix products: every row count of decode / verify and a prefill-sized one ----
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::MXFP4}) {
    for (int64_t n : {1, 5, 33}) {
      cases.push_back({"matmul_" + std::string(type_name(t)) + "_n" + std::to_string(n), kMatmul,
                       [t, n](Backend& b, DeviceData& d) {
                         const int64_t k = 512, m = 70;
                         const Tensor W = d.weight(t, randn(static_cast<size_t>(k * m), 16, 0.1f), k);
                         const Tensor x = d.f32(randn(static_cast<size_t>(k * n), 17), k), y = d.zeros(m, n);
                         b.matmul(W, x, y);
                         return d.read(y);
                       }});
    }
  }
  // ---- fused ops (backend.h): the CPU runs their unfused defaults; CUDA fuses them ----
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::F16}) {
    for (int64_t n : {1, 2, 5}) {
      const std::string tag = std::string(type_name(t)) + "_n" + std::to_string(n);
      cases.push_back({"norm_matmuls_" + tag, kMatmul, [t, n](Backend& b, DeviceData& d) {
                         const int64_t k = 512;
                         const Tensor x = d.f32(randn(static_cast<size_t>(k * n), 60, 2.0f), k);
                         const Tensor w = d.f32(randn(k, 61), k), xn = d.zeros(k, n);
                         // three of type t (one launch on CUDA), then an F32 one (a second group)
                         std::vector<Projection> p;
                         const int64_t ms[] = {70, 64, 48, 40};
                         for (int i = 0; i < 4; ++i) {
                           const GgmlType ti = i < 3 ? t : GgmlType::F32;
                           p.push_back(Projection{d.weight(ti, randn(static_cast<size_t>(k * ms[i]), 62 + i, 0.1f), k),
                                                  d.zeros(ms[i], n)});
                         }
                         p[1].epi = Epilogue::SIGMOID;
                         p[3].epi = Epilogue::SOFTPLUS_SCALE;
                         p[3].bias = d.f32(randn(40, 70), 40);
                         p[3].scale = d.f32(randn(40, 71), 40);
                         b.norm_matmuls(x, w, 1e-6f, xn, p);
                         std::vector<float> out;
                         for (const Projection& q : p) {
                           const auto y = d.read(q.y);
                           out.insert(out.end(), y.begin(), y.end());
                         }
                         return out;
                       }});
      cases.push_back({"norm_swiglu_" + tag, kMatmul, [t, n](Backend& b, DeviceData& d) {
                         const int64_t k = 512, m = 96;
                         const Tensor x = d.f32(randn(static_cast<size_t>(k * n), 72, 2.0f), k);
                         const Tensor w = d.f32(randn(k, 73), k), xn = d.zeros(k, n);
                         const Tensor Wg = d.weight(t, randn(static_cast<size_t>(k * m), 74, 0.1f), k);
                         const Tensor Wu = d.weight(t, randn(static_cast<size_t>(k * m), 75, 0.1f), k);
                         const Tensor gate = d.zeros(m, n), up = d.zeros(m, n);
                         b.norm_swiglu(x, w, 1e-6f, xn, Wg, Wu, gate, up);
                         return d.read(gate);
                       }});
      cases.push_back({"matmul_add_" + tag, kMatmul, [t, n](Backend& b, DeviceData& d) {
                         const int64_t k = 512, m = 80;
                         const Tensor W = d.weight(t, randn(static_cast<size_t>(k * m), 76, 0.1f), k);
                         const Tensor x = d.f32(randn(static_cast<size_t>(k * n), 77), k);
                         const Tensor acc = d.f32(randn(static_cast<size_t>(m * n), 78), m), tmp = d.zeros(m, n);
                         b.matmul_add(W, x, tmp, acc);
                         return d.read(acc);
                       }});
    }
  }
  for (const int32_t sec : {0, 2}) {  // plain NeoX over part of the head; IMROPE sections
    cases.push_back({"qk_norm_rope_store_s" + std::to_string(sec), kMatmul, [sec](Backend& b, DeviceData& d) {
                       const int32_t nh = 4, nkv = 2, hd = 64;
                       const int64_t n = 3, qd = nh * hd, kvd = nkv * hd, ctx = 16;
                       const Tensor q = d.f32(randn(static_cast<size_t>(n * qd), 80, 2.0f), qd);
                       const Tensor k = d.f32(randn(static_cast<size_t>(n * kvd), 81, 2.0f), kvd);
                       const Tensor v = d.f32(randn(static_cast<size_t>(n * kvd), 82), kvd);
                       const Tensor qn = d.f32(randn(hd, 83), hd), kn = d.f32(randn(hd, 84), hd);
                       RopeParams rq;
                       rq.n_head = nh, rq.head_dim = hd, rq.n_rot = 32, rq.freq_base = 1e4f;
                       for (int i = 0; i < 4; ++i) rq.sections[i] = sec;
                       RopeParams rk = rq;
                       rk.n_head = nkv;
                       KvCache c = b.alloc_kv_cache(ctx, kvd, GgmlType::F16);
                       const Tensor pos = d.i32(positions(5, n));
                       b.qk_norm_rope(q, k, v, qn, kn, 1e-6f, pos, rq, rk, &c);
                       // the cache through attention: the rows at positions 5..7 see keys 0..7
                       // (0..4 zero: the cache starts zeroed on every backend)
                       const Tensor out = d.zeros(qd, n);
                       b.attention(q, c, pos, AttentionParams{nh, nkv, hd, 0.125f}, out);
                       std::vector<float> r = d.read(q), kk = d.read(k), o = d.read(out);
                       r.insert(r.end(), kk.begin(), kk.end());
                       r.insert(r.end(), o.begin(), o.end());
                       return r;
                     }});
  }
  for (const int64_t n : {1, 5}) {  // the fused op of one sequence's rows (q, k scratch): its output
    cases.push_back({"qk_norm_rope_attention_n" + std::to_string(n), kMatmul, [n](Backend& b, DeviceData& d) {
                       const int32_t nh = 8, nkv = 2, hd = 128;
                       const int64_t qd = nh * hd, kvd = nkv * hd, ctx = 256;
                       const Tensor q = d.f32(randn(static_cast<size_t>(n * qd), 85, 2.0f), qd);
                       const Tensor k = d.f32(randn(static_cast<size_t>(n * kvd), 86, 2.0f), kvd);
                       const Tensor v = d.f32(randn(static_cast<size_t>(n * kvd), 87), kvd);
                       const Tensor qn = d.f32(randn(hd, 88), hd), kn = d.f32(randn(hd, 89), hd);
                       RopeParams rq;
                       rq.n_head = nh, rq.head_dim = hd, rq.n_rot = hd, rq.freq_base = 1e6f;
                       RopeParams rk = rq;
                       rk.n_head = nkv;
                       KvCache c = b.alloc_kv_cache(ctx, kvd, GgmlType::F16);
                       const Tensor pos = d.i32(positions(62, n));  // across the GPU's 64-position slices
                       const Tensor out = d.zeros(qd, n);
                       b.qk_norm_rope_attention(q, k, v, qn, kn, 1e-6f, pos, rq, rk, c,
                                                AttentionParams{nh, nkv, hd, 0.088f}, out);
                       return d.read(out);
                     }});
  }
  // ---- mixture of experts: router (ids the same, weights elementwise), grouped expert
  //      products (decode, verify and prefill row counts; x shared or one row per slot), combine ----
  for (const auto& [E, k] : {std::pair<int64_t, int64_t>{8, 2}, {256, 8}}) {
    auto route = [E, k](Backend& b, DeviceData& d, bool want_ids) {
      const int64_t n = 9;
      const Tensor logits = d.f32(randn(static_cast<size_t>(n * E), 40, 2.0f), E);
      const Tensor ids = d.zeros(k, n, GgmlType::I32), w = d.zeros(k, n);
      b.moe_route(logits, true, 0.0f, ids, w);
      return want_ids ? d.read_i32(ids.reshape(1)) : d.read(w);
    };
    const std::string tag = "_E" + std::to_string(E) + "_k" + std::to_string(k);
    cases.push_back({"moe_route_ids" + tag, 0.0, [route](Backend& b, DeviceData& d) { return route(b, d, true); }});
    cases.push_back({"moe_route_weights" + tag, kElem, [route](Backend& b, DeviceData& d) { return route(b, d, false); }});
  }
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    for (int64_t n : {1, 5, 33}) {
      for (const bool per_slot : {false, true}) {
        cases.push_back({"matmul_id_" + std::string(type_name(t)) + "_n" + std::to_string(n) + (per_slot ? "_slots" : ""),
                         kMatmul, [t, n, per_slot](Backend& b, DeviceData& d) {
                           const int64_t E = 6, m = 40, cols = 256, k = 3;
                           const Tensor W = d.weight(t, randn(static_cast<size_t>(E * m * cols), 41, 0.1f), cols);
                           std::vector<int32_t> ids;
                           for (int64_t r = 0; r < n; ++r)
                             for (int64_t j = 0; j < k; ++j) ids.push_back(static_cast<int32_t>((r * 5 + j * 2 + r / 3) % E));
                           const Tensor x = d.f32(randn(static_cast<size_t>((per_slot ? n * k : n) * cols), 42), cols);
                           const Tensor y = d.zeros(m, n * k);
                           b.matmul_id(W, E, x, d.i32(ids).reshape(k), y);
                           return d.read(y);
                         }});
      }
    }
  }
  cases.push_back({"moe_combine_shared", kElem, [](Backend& b, DeviceData& d) {
                     const int64_t n = 5, k = 4, dim = 96;
                     const Tensor e = d.f32(randn(static_cast<size_t>(n * k * dim), 43), dim), w = d.f32(randn(n * k, 44), k);
                     const Tensor sh = d.f32(randn(static_cast<size_t>(n * dim), 45), dim), g = d.f32(randn(n, 46), 1);
                     const Tensor out = d.zeros(dim, n), plain = d.zeros(dim, n);
                     b.moe_combine(e, w, sh, g, out);
                     b.moe_combine(e, w, Tensor{}, Tensor{}, plain);
                     auto o = d.read(out), p = d.read(plain);
                     o.insert(o.end(), p.begin(), p.end());
                     return o;
                   }});
  // ---- rotary embedding: plain NeoX and IMROPE sections, positions of two sequences ----
  for (const std::vector<int64_t>& sec : {std::vector<int64_t>{0, 0, 0, 0}, {11, 11, 10, 0}, {8, 8, 4, 4}, {3, 2, 1, 2}}) {
    cases.push_back({"rope_sections_" + std::to_string(sec[0]) + "_" + std::to_string(sec[3]), kElem,
                     [sec](Backend& b, DeviceData& d) {
                       RopeParams p;
                       p.n_head = 3;
                       p.head_dim = 64;
                       p.n_rot = 48;
                       p.freq_base = 1e6f;
                       for (int i = 0; i < 4; ++i) p.sections[i] = static_cast<int32_t>(sec[static_cast<size_t>(i)]);
                       const Tensor x = d.f32(randn(5 * 192, 18), 192);
                       b.rope(x, d.i32({0, 1, 2, 700, 701}), p);
                       return d.read(x);
                     }});
  }
  // ---- KV cache and attention ----
  for (GgmlType ct : {GgmlType::F16, GgmlType::F32}) {
    for (int64_t n : {1, 6}) {
      cases.push_back({"attention_" + std::string(type_name(ct)) + "_n" + std::to_string(n), kMatmul,
                       [ct, n](Backend& b, DeviceData& d) {
                         const int32_t nh = 4, nkv = 2, hd = 32;
                         const int64_t past = 300;  // past the first 256-position block
                         KvCache c = b.alloc_kv_cache(400, nkv * hd, ct);
                         b.kv_store(c, d.f32(randn(past * nkv * hd, 19), nkv * hd), d.f32(randn(past * nkv * hd, 20), nkv * hd),
                                    d.i32(positions(0, past)));
                         const Tensor k = d.f32(randn(static_cast<size_t>(n * nkv * hd), 21), nkv * hd);
                         const Tensor v = d.f32(randn(static_cast<size_t>(n * nkv * hd), 22), nkv * hd);
                         const Tensor pos = d.i32(positions(past, n));
                         b.kv_store(c, k, v, pos);
                         const Tensor q = d.f32(randn(static_cast<size_t>(n * nh * hd), 23), nh * hd), out = d.zeros(nh * hd, n);
                         b.attention(q, c, pos, AttentionParams{nh, nkv, hd, 1.0f / std::sqrt(32.0f)}, out);
                         return d.read(out);
                       }});
    }
  }
  // ---- recurrent ops, with snapshot slots ----
  cases.push_back({"ssm_conv_snapshots", kElem, [](Backend& b, DeviceData& d) {
                     const int64_t C = 80, K = 4, n = 5, m = 3;
                     const Tensor state = d.f32(randn(static_cast<size_t>((K - 1) * C), 24), C);
                     const Tensor x = d.f32(randn(static_cast<size_t>(n * C), 25), C), y = d.zeros(C, n);
                     const Tensor snaps = d.zeros(C, m * (K - 1));
                     b.ssm_conv(x, state, d.f32(randn(static_cast<size_t>(C * K), 26, 0.5f), K), y, snaps);
                     auto out = d.read(y), s = d.read(state), sn = d.read(snaps);
                     out.insert(out.end(), s.begin(), s.end());
                     out.insert(out.end(), sn.begin(), sn.end());
                     return out;
                   }});
  cases.push_back({"gated_delta_rule_snapshots", kElem, [](Backend& b, DeviceData& d) {
                     const int64_t Hk = 2, Hv = 4, S = 32, n = 4, m = 4;
                     auto qk = randn(static_cast<size_t>(n * Hk * S), 27, 0.2f), kk = randn(static_cast<size_t>(n * Hk * S), 28, 0.2f);
                     auto g = randn(static_cast<size_t>(n * Hv), 29, 0.3f);
                     for (auto& e : g) e = -std::fabs(e);
                     auto beta = randn(static_cast<size_t>(n * Hv), 30);
                     for (auto& e : beta) e = 1.0f / (1.0f + std::exp(-e));
                     const Tensor state = d.f32(randn(static_cast<size_t>(Hv * S * S), 31, 0.1f), S);
                     const Tensor out = d.zeros(Hv * S, n), snaps = d.zeros(S, m * Hv * S);
                     b.gated_delta_rule(d.f32(qk, Hk * S), d.f32(kk, Hk * S), d.f32(randn(static_cast<size_t>(n * Hv * S), 32), Hv * S),
                                        d.f32(g, Hv), d.f32(beta, Hv), state, 1.0f / std::sqrt(32.0f), out, snaps);
                     auto o = d.read(out), s = d.read(state), sn = d.read(snaps);
                     o.insert(o.end(), s.begin(), s.end());
                     o.insert(o.end(), sn.begin(), sn.end());
                     return o;
                   }});
  // The fused DeltaNet core (CPU: its six ops; CUDA: two launches per sequence up to 8 rows, the
  // six ops past): one or two sequences, with and without snapshot slots.
  struct Seqs { std::vector<int64_t> rows; bool snaps; };
  for (const Seqs& c : {Seqs{{1}, false}, Seqs{{3}, true}, Seqs{{5, 3}, true}, Seqs{{2, 10}, false}}) {
    std::string tag;
    for (int64_t r : c.rows) tag += "_" + std::to_string(r);
    cases.push_back({"delta_net_core" + tag + (c.snaps ? "_snapshots" : ""), kElem, [c](Backend& b, DeviceData& d) {
                       const int64_t S = 32, Hk = 2, Hv = 4, K = 4, C = 2 * Hk * S + Hv * S, m = 2;
                       int64_t n = 0;
                       for (int64_t r : c.rows) n += r;
                       DeltaNetCore a;
                       a.qkv = d.f32(randn(static_cast<size_t>(n * C), 90, 1.5f), C);
                       a.conv_w = d.f32(randn(static_cast<size_t>(C * K), 91, 0.5f), K);
                       a.conv = d.zeros(C, n);
                       a.z = d.f32(randn(static_cast<size_t>(n * Hv * S), 92, 2.0f), Hv * S);
                       auto beta = randn(static_cast<size_t>(n * Hv), 93), g = randn(static_cast<size_t>(n * Hv), 94, 0.3f);
                       for (auto& e : beta) e = 1.0f / (1.0f + std::exp(-e));
                       for (auto& e : g) e = -std::fabs(e);
                       a.beta = d.f32(beta, Hv), a.g = d.f32(g, Hv);
                       a.norm = d.f32(randn(S, 95), S);
                       a.o = d.zeros(Hv * S, n);
                       a.head_dim = S, a.n_k_heads = Hk, a.eps = 1e-6f;
                       std::vector<DeltaNetSeq> seqs;
                       int64_t row0 = 0;
                       for (size_t i = 0; i < c.rows.size(); ++i) {
                         DeltaNetSeq q;
                         q.row0 = row0, q.n = c.rows[i];
                         q.conv_state = d.f32(randn(static_cast<size_t>((K - 1) * C), 96 + static_cast<uint32_t>(i)), C);
                         q.ssm_state = d.f32(randn(static_cast<size_t>(Hv * S * S), 98 + static_cast<uint32_t>(i), 0.1f), S);
                         if (c.snaps) q.conv_snap = d.zeros(C, m * (K - 1)), q.ssm_snap = d.zeros(S, m * Hv * S);
                         seqs.push_back(q);
                         row0 += c.rows[i];
                       }
                       b.delta_net_core(a, seqs);
                       std::vector<float> out = d.read(a.o);
                       auto add = [&](const Tensor& t) {
                         const auto v = d.read(t);
                         out.insert(out.end(), v.begin(), v.end());
                       };
                       add(a.conv);
                       for (const DeltaNetSeq& q : seqs) {
                         add(q.conv_state);
                         add(q.ssm_state);
                         if (c.snaps) add(q.conv_snap), add(q.ssm_snap);
                       }
                       return out;
                     }});
  }
  return cases;
}

const std::vector<OpCase>& cases() {
  static const std::vector<OpCase> c = make_cases();
  return c;
}

struct Param {
  std::string backend;
  size_t index;
};

void PrintTo(const Param& p, std::ostream* os) { *os << p.backend << " " << cases()[p.index].name; }

class BackendOps : public ::testing::TestWithParam<Param> {};

TEST_P(BackendOps, MatchesReference) {
  const OpCase& c = cases()[GetParam().index];
  auto ref_backend = optest::make_named(optest::kReference);
  auto test_backend = optest::make_named(GetParam().backend);
  DeviceData rd(*ref_backend), td(*test_backend);
  const std::vector<float> want = c.run(*ref_backend, rd), got = c.run(*test_backend, td);
  ASSERT_EQ(want.size(), got.size());
  if (c.max_nmse == 0.0) {
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], got[i]) << c.name << " element " << i;
  } else {
    EXPECT_LE(nerr(want, got), c.max_nmse) << c.name << " on " << GetParam().backend;
  }
  for (float v : got) ASSERT_TRUE(std::isfinite(v)) << c.name;
}

std::vector<Param> params() {
  std::vector<Param> p;
  for (const std::string& b : optest::backend_names())
    for (size_t i = 0; i < cases().size(); ++i) p.push_back({b, i});
  return p;
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string s = info.param.backend + "_" + cases()[info.param.index].name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(All, BackendOps, ::testing::ValuesIn(params()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendOps);

}  // namespace
}  // namespace df
