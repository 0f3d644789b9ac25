// CPU backend ops against plain double-precision references written here, and the SIMD
// backend against the scalar one, with normalised error mse(a, b) / mse(a, 0).
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

TEST(CpuOps, RmsNorm) {
  const int64_t k = 96, n = 5;
  auto x = randn(static_cast<size_t>(k * n), 1, 3.0f);
  auto w = randn(static_cast<size_t>(k), 2);
  std::vector<float> ref(x.size());
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < k; ++i) ss += static_cast<double>(x[r * k + i]) * x[r * k + i];
    const double s = 1.0 / std::sqrt(ss / k + 1e-6);
    for (int64_t i = 0; i < k; ++i) ref[r * k + i] = static_cast<float>(x[r * k + i] * s * w[i]);
  }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> y(x.size());
    b.rms_norm(view(x, k), view(w, k), 1e-6f, view(y, k));
    EXPECT_LT(nerr(ref, y), 1e-12) << cpu::isa_name(isa);
  }
}

TEST(CpuOps, RopeNeoxPartial) {
  const int32_t heads = 3, hd = 16, n_rot = 8;
  const int64_t n = 4, pos0 = 5;
  const float base = 10000.0f;
  auto x = randn(static_cast<size_t>(n * heads * hd), 3);
  std::vector<float> ref = x;
  for (int64_t r = 0; r < n; ++r)
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t i = 0; i < n_rot / 2; ++i) {
        const double th = static_cast<double>(pos0 + r) * std::pow(base, -2.0 * i / n_rot);
        float* v = x.data() + (r * heads + h) * hd;
        float* o = ref.data() + (r * heads + h) * hd;
        o[i] = static_cast<float>(v[i] * std::cos(th) - v[i + n_rot / 2] * std::sin(th));
        o[i + n_rot / 2] = static_cast<float>(v[i] * std::sin(th) + v[i + n_rot / 2] * std::cos(th));
      }
  cpu::CpuBackend b({2, cpu::best_isa()});
  auto pos = optest::positions(pos0, n);
  RopeParams rp;
  rp.n_head = heads;
  rp.head_dim = hd;
  rp.n_rot = n_rot;
  rp.freq_base = base;
  b.rope(view(x, heads * hd), optest::view_i32(pos), rp);
  EXPECT_LT(nerr(ref, x), 1e-10);
  // dims past n_rot are untouched
  EXPECT_EQ(ref[n_rot], x[n_rot]);
}

// Causal GQA attention in double over F32 or F16 caches.
void attention_case(bool f16) {
  const int32_t n_head = 4, n_kv = 2, hd = 32;
  const int64_t n_ctx = 24, pos0 = 7, n = 6;
  auto q = randn(static_cast<size_t>(n * n_head * hd), 4);
  auto kr = randn(static_cast<size_t>((pos0 + n) * n_kv * hd), 5);
  auto vr = randn(static_cast<size_t>((pos0 + n) * n_kv * hd), 6);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> ref(q.size());
  for (int64_t r = 0; r < n; ++r)
    for (int32_t h = 0; h < n_head; ++h) {
      const int32_t hk = h / (n_head / n_kv);
      std::vector<double> s(static_cast<size_t>(pos0 + r + 1));
      double mx = -1e300;
      for (int64_t j = 0; j <= pos0 + r; ++j) {
        double d = 0;
        for (int i = 0; i < hd; ++i) d += static_cast<double>(q[(r * n_head + h) * hd + i]) * kr[(j * n_kv + hk) * hd + i];
        s[j] = d * scale;
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int i = 0; i < hd; ++i) {
        double o = 0;
        for (int64_t j = 0; j <= pos0 + r; ++j) o += s[j] / sum * vr[(j * n_kv + hk) * hd + i];
        ref[(r * n_head + h) * hd + i] = static_cast<float>(o);
      }
    }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    const GgmlType ct = f16 ? GgmlType::F16 : GgmlType::F32;
    KvCache cache = b.alloc_kv_cache(n_ctx, n_kv * hd, ct);
    auto kpos = optest::positions(0, pos0 + n), qpos = optest::positions(pos0, n);
    b.kv_store(cache, view(kr, n_kv * hd), view(vr, n_kv * hd), optest::view_i32(kpos));
    std::vector<float> out(q.size());
    AttentionParams p{n_head, n_kv, hd, scale};
    b.attention(view(q, n_head * hd), cache, optest::view_i32(qpos), p, view(out, n_head * hd));
    EXPECT_LT(nerr(ref, out), f16 ? 1e-5 : 1e-11) << cpu::isa_name(isa);
  }
}

TEST(CpuOps, AttentionF32Cache) { attention_case(false); }
TEST(CpuOps, AttentionF16Cache) { attention_case(true); }

TEST(CpuOps, SwigluAddCopy) {
  auto g = randn(300, 7, 2.0f), u = randn(300, 8);
  std::vector<float> out(300), ref(300);
  for (size_t i = 0; i < 300; ++i) ref[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
  cpu::CpuBackend b({2, cpu::best_isa()});
  b.swiglu(view(g, 30), view(u, 30), view(out, 30));
  EXPECT_LT(nerr(ref, out), 1e-12);
  std::vector<float> c(300);
  b.copy(view(out, 30), view(c, 30));
  b.add(view(c, 30), view(out, 30));
  for (size_t i = 0; i < 300; ++i) EXPECT_EQ(c[i], 2 * out[i]);
}

TEST(CpuOps, MatmulF32MatchesDouble) {
  const int64_t k = 64, m = 37, n = 5;
  auto w = randn(static_cast<size_t>(k * m), 9), x = randn(static_cast<size_t>(k * n), 10);
  std::vector<float> ref(static_cast<size_t>(n * m));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < m; ++i) {
      double d = 0;
      for (int64_t j = 0; j < k; ++j) d += static_cast<double>(w[i * k + j]) * x[r * k + j];
      ref[r * m + i] = static_cast<float>(d);
    }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> y(ref.size());
    b.matmul(b.weight(GgmlType::F32, k, m, w.data()), view(x, k), view(y, m));
    EXPECT_LT(nerr(ref, y), 1e-11) << cpu::isa_name(isa);
  }
}

}  // namespace
}  // namespace df
