// Recurrent-layer ops of the CPU backend (unary gates, grouped L2 norm, causal depthwise conv
// with a carried state, gated delta rule) against plain double-precision references written
// here, for every ISA, with normalised error mse(a, b) / mse(a, 0).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "op_test_util.h"

namespace df {
namespace {

using optest::isas;
using optest::nerr;
using optest::randn;
using optest::view;

double silu_d(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus_d(double x) { return std::log1p(std::exp(x)); }

TEST(SsmOps, UnaryAndGates) {
  const int64_t k = 40, n = 7;
  auto x = randn(static_cast<size_t>(k * n), 1, 6.0f);
  x[3] = 25.0f;  // softplus' linear branch
  x[4] = -30.0f;
  auto g = randn(x.size(), 2, 3.0f);
  std::vector<double> silu(x.size()), sig(x.size()), sp(x.size()), smul(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    silu[i] = silu_d(x[i]);
    sig[i] = sigmoid_d(x[i]);
    sp[i] = softplus_d(x[i]);
    smul[i] = x[i] * sigmoid_d(g[i]);
  }
  auto tof = [](const std::vector<double>& d) { return std::vector<float>(d.begin(), d.end()); };
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> y(x.size());
    b.unary(UnaryOp::SILU, view(x, k), view(y, k));
    EXPECT_LT(nerr(tof(silu), y), 1e-12);
    b.unary(UnaryOp::SIGMOID, view(x, k), view(y, k));
    EXPECT_LT(nerr(tof(sig), y), 1e-12);
    b.unary(UnaryOp::SOFTPLUS, view(x, k), view(y, k));
    EXPECT_LT(nerr(tof(sp), y), 1e-12);
    EXPECT_EQ(y[3], 25.0f);
    std::vector<float> xin = x;  // in place, output aliasing the gated input
    b.sigmoid_mul(view(g, k), view(xin, k), view(xin, k));
    EXPECT_LT(nerr(tof(smul), xin), 1e-12);
  }
}

TEST(SsmOps, SoftplusScale) {
  const int64_t H = 6, n = 5;
  auto x = randn(static_cast<size_t>(H * n), 3, 4.0f);
  auto bias = randn(static_cast<size_t>(H), 4), a = randn(static_cast<size_t>(H), 5);
  std::vector<float> ref(x.size()), out(x.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t h = 0; h < H; ++h)
      ref[r * H + h] = static_cast<float>(softplus_d(static_cast<double>(x[r * H + h]) + bias[h]) * a[h]);
  cpu::CpuBackend b({1, cpu::best_isa()});
  b.softplus_scale(view(x, H), view(bias, H), view(a, H), view(out, H));
  EXPECT_LT(nerr(ref, out), 1e-12);
}

TEST(SsmOps, L2NormGroupsOfAStridedView) {
  // x is the middle 3 * 16 columns of a [n, 80] matrix, normalised in place per group of 16.
  const int64_t n = 9, wide = 80, c0 = 8, group = 16, groups = 3;
  auto m = randn(static_cast<size_t>(n * wide), 6, 2.0f);
  for (int64_t i = 0; i < group; ++i) m[static_cast<size_t>(wide + c0 + i)] = 0.0f;  // an all-zero group: eps
  std::vector<float> ref = m;
  const float eps = 1e-6f;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t gi = 0; gi < groups; ++gi) {
      double ss = 0;
      float* p = ref.data() + r * wide + c0 + gi * group;
      for (int64_t i = 0; i < group; ++i) ss += static_cast<double>(p[i]) * p[i];
      const double s = 1.0 / std::max(std::sqrt(ss), static_cast<double>(eps));
      for (int64_t i = 0; i < group; ++i) p[i] = static_cast<float>(p[i] * s);
    }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> got = m;
    const Tensor x = view(got, wide).slice_cols(c0, group * groups);
    b.l2_norm(x, group, eps, x);
    EXPECT_LT(nerr(ref, got), 1e-12) << cpu::isa_name(isa);
    EXPECT_EQ(got[0], m[0]);  // columns outside the view untouched
    EXPECT_EQ(got[wide - 1], m[wide - 1]);
  }
}

// The whole sequence convolved at once in double, against the op run chunk by chunk with its
// carried state; chunk sizes include ones shorter than the kernel history.
void conv_case(int64_t C, int64_t K, const std::vector<int64_t>& chunks) {
  int64_t T = 0;
  for (auto c : chunks) T += c;
  const int64_t wide = C + 24, c0 = 16;  // x is a strided column view of a wider matrix
  auto xs = randn(static_cast<size_t>(T * wide), 7);
  auto w = randn(static_cast<size_t>(C * K), 8, 0.5f);
  std::vector<float> ref(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t i = 0; i < K; ++i) {
        const int64_t src = t + i - (K - 1);  // inputs before t = 0 are zero
        if (src >= 0) s += static_cast<double>(xs[src * wide + c0 + c]) * w[c * K + i];
      }
      ref[t * C + c] = static_cast<float>(s);
    }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> state(static_cast<size_t>((K - 1) * C), 0.0f), out(ref.size());
    int64_t t0 = 0;
    for (auto n : chunks) {
      const Tensor x = view(xs, wide).slice_rows(t0, n).slice_cols(c0, C);
      b.ssm_conv(x, view(state, C), view(w, K), view(out, C).slice_rows(t0, n), Tensor{});
      t0 += n;
    }
    EXPECT_LT(nerr(ref, out), 1e-12) << "C " << C << " " << cpu::isa_name(isa);
    // the state holds the last K-1 inputs
    for (int64_t r = 0; r < K - 1; ++r)
      for (int64_t c = 0; c < C; ++c)
        ASSERT_EQ(state[r * C + c], xs[(T - (K - 1) + r) * wide + c0 + c]) << "state row " << r;
  }
}

TEST(SsmOps, ConvChunkedWithState) {
  conv_case(72, 4, {1, 2, 1, 5, 3, 1});      // chunks shorter than K-1, two channel blocks
  conv_case(200, 4, {1, 90, 7, 1});           // large chunk: the parallel path
  conv_case(33, 2, {3, 1, 4});                // K = 2: a one-row state
}

// The gated delta rule from its definition, in double: per value head h (key head h % Hk),
//   S = exp(g) S;  S += k (beta (v - S^T k))^T  (S[i][j], i key dim, j value dim);  o = S^T q * scale
struct DeltaRef {
  int64_t Hk, Hv, d;
  std::vector<double> S;  // [Hv][i][j]
  DeltaRef(int64_t hk, int64_t hv, int64_t dd) : Hk(hk), Hv(hv), d(dd), S(static_cast<size_t>(hv * dd * dd), 0.0) {}
  void step(const float* q, const float* k, const float* v, const float* g, const float* beta, float scale,
            float* out) {
    for (int64_t h = 0; h < Hv; ++h) {
      const int64_t hk = h % Hk;
      double* s = S.data() + h * d * d;
      const double decay = std::exp(static_cast<double>(g[h]));
      for (int64_t x = 0; x < d * d; ++x) s[x] *= decay;
      for (int64_t j = 0; j < d; ++j) {
        double sk = 0;
        for (int64_t i = 0; i < d; ++i) sk += s[i * d + j] * k[hk * d + i];
        const double delta = (v[h * d + j] - sk) * beta[h];
        for (int64_t i = 0; i < d; ++i) s[i * d + j] += k[hk * d + i] * delta;
      }
      for (int64_t j = 0; j < d; ++j) {
        double o = 0;
        for (int64_t i = 0; i < d; ++i) o += s[i * d + j] * q[hk * d + i];
        out[h * d + j] = static_cast<float>(o * scale);
      }
    }
  }
};

void delta_case(int64_t Hk, int64_t Hv, int64_t d, const std::vector<int64_t>& chunks) {
  int64_t T = 0;
  for (auto c : chunks) T += c;
  // q, k, v are column views of one [T, 2 Hk d + Hv d] matrix, as in the model.
  const int64_t wide = 2 * Hk * d + Hv * d;
  auto qkv = randn(static_cast<size_t>(T * wide), 9);
  for (int64_t t = 0; t < T; ++t)  // unit-norm q and k rows per head, as after l2_norm
    for (int64_t h = 0; h < 2 * Hk; ++h) {
      double ss = 0;
      float* p = qkv.data() + t * wide + h * d;
      for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(p[i]) * p[i];
      for (int64_t i = 0; i < d; ++i) p[i] = static_cast<float>(p[i] / std::sqrt(ss));
    }
  auto g = randn(static_cast<size_t>(T * Hv), 10, 0.5f);
  for (auto& x : g) x = -std::abs(x);  // log decay <= 0
  auto beta = randn(static_cast<size_t>(T * Hv), 11);
  for (auto& x : beta) x = static_cast<float>(sigmoid_d(x));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  DeltaRef ref(Hk, Hv, d);
  std::vector<float> want(static_cast<size_t>(T * Hv * d));
  for (int64_t t = 0; t < T; ++t)
    ref.step(qkv.data() + t * wide, qkv.data() + t * wide + Hk * d, qkv.data() + t * wide + 2 * Hk * d,
             g.data() + t * Hv, beta.data() + t * Hv, scale, want.data() + t * Hv * d);
  // the op's state is S transposed: row (h, j) holds S_h[.][j]
  std::vector<float> want_state(static_cast<size_t>(Hv * d * d));
  for (int64_t h = 0; h < Hv; ++h)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t j = 0; j < d; ++j) want_state[(h * d + j) * d + i] = static_cast<float>(ref.S[(h * d + i) * d + j]);
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> state(want_state.size(), 0.0f), out(want.size());
    int64_t t0 = 0;
    for (auto n : chunks) {
      const Tensor m = view(qkv, wide).slice_rows(t0, n);
      b.gated_delta_rule(m.slice_cols(0, Hk * d), m.slice_cols(Hk * d, Hk * d), m.slice_cols(2 * Hk * d, Hv * d),
                         view(g, Hv).slice_rows(t0, n), view(beta, Hv).slice_rows(t0, n), view(state, d), scale,
                         view(out, Hv * d).slice_rows(t0, n), Tensor{});
      t0 += n;
    }
    EXPECT_LT(nerr(want, out), 1e-10) << "Hk " << Hk << " Hv " << Hv << " d " << d << " " << cpu::isa_name(isa);
    EXPECT_LT(nerr(want_state, state), 1e-10) << cpu::isa_name(isa);
  }
}

// Snapshot slots: slot t of a call over n rows holds the state a call over the first t + 1
// rows leaves (the same bits), for the convolution and the delta rule.
TEST(SsmOps, SnapshotSlotsHoldTheStateAfterEachRow) {
  const int64_t C = 40, K = 4, H = K - 1, n = 5, m = 4;
  const int64_t Hk = 1, Hv = 2, d = 16;
  auto x = randn(static_cast<size_t>(n * C), 41), w = randn(static_cast<size_t>(C * K), 42, 0.5f);
  auto s0 = randn(static_cast<size_t>(H * C), 43);
  auto q = randn(static_cast<size_t>(n * Hk * d), 44, 0.3f), k = randn(static_cast<size_t>(n * Hk * d), 45, 0.3f);
  auto v = randn(static_cast<size_t>(n * Hv * d), 46), g = randn(static_cast<size_t>(n * Hv), 47, 0.2f);
  auto beta = randn(static_cast<size_t>(n * Hv), 48);
  for (auto& e : g) e = -std::fabs(e);
  for (auto& e : beta) e = 1.0f / (1.0f + std::exp(-e));
  auto S0 = randn(static_cast<size_t>(Hv * d * d), 49, 0.1f);
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> cs = s0, snaps(static_cast<size_t>(m * H * C)), y(static_cast<size_t>(n * C));
    b.ssm_conv(view(x, C), view(cs, C), view(w, K), view(y, C), view(snaps, C));
    std::vector<float> Ss = S0, dsn(static_cast<size_t>(m * Hv * d * d)), o(static_cast<size_t>(n * Hv * d));
    b.gated_delta_rule(view(q, Hk * d), view(k, Hk * d), view(v, Hv * d), view(g, Hv), view(beta, Hv), view(Ss, d),
                       0.25f, view(o, Hv * d), view(dsn, d));
    for (int64_t t = 0; t < m; ++t) {
      std::vector<float> c1 = s0, y1(static_cast<size_t>((t + 1) * C));
      b.ssm_conv(view(x, C).slice_rows(0, t + 1), view(c1, C), view(w, K), view(y1, C), Tensor{});
      EXPECT_EQ(c1, std::vector<float>(snaps.begin() + t * H * C, snaps.begin() + (t + 1) * H * C)) << "conv slot " << t;
      std::vector<float> S1 = S0, o1(static_cast<size_t>((t + 1) * Hv * d));
      b.gated_delta_rule(view(q, Hk * d).slice_rows(0, t + 1), view(k, Hk * d).slice_rows(0, t + 1),
                         view(v, Hv * d).slice_rows(0, t + 1), view(g, Hv).slice_rows(0, t + 1),
                         view(beta, Hv).slice_rows(0, t + 1), view(S1, d), 0.25f, view(o1, Hv * d), Tensor{});
      EXPECT_EQ(S1, std::vector<float>(dsn.begin() + t * Hv * d * d, dsn.begin() + (t + 1) * Hv * d * d))
          << "delta slot " << t << " " << cpu::isa_name(isa);
    }
  }
}

TEST(SsmOps, GatedDeltaRule) {
  delta_case(2, 2, 16, {5, 1, 3});
  delta_case(2, 6, 32, {1, 1, 7, 2});  // key heads fewer than value heads (tiled: h % Hk)
  delta_case(1, 3, 20, {4, 4});        // a head size that is not a multiple of the vector width
  delta_case(4, 8, 128, {3, 1});       // Qwen3.5's head size
}

}  // namespace
}  // namespace df
