// Mixture-of-experts ops of the CPU backend (router, grouped expert matmul, combine) against
// plain references written here: a double-precision softmax with a full sort for the router,
// dense matmuls of one expert at a time for matmul_id, a loop for the combine. Every ISA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "op_test_util.h"
#include "quant/cpu/kernels.h"

namespace df {
namespace {

using optest::isas;
using optest::nerr;
using optest::randn;
using optest::view;
using optest::view_i32;

struct Route {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

// Reference router: softmax in double, experts sorted by decreasing p (stable: the lower index
// first on equal p), weights p / sum(p) over the chosen ones.
Route ref_route(const std::vector<float>& logits, int64_t E, int64_t k, bool normalize, float scale) {
  const int64_t n = static_cast<int64_t>(logits.size()) / E;
  Route out;
  for (int64_t r = 0; r < n; ++r) {
    const float* x = logits.data() + r * E;
    const double mx = *std::max_element(x, x + E);
    std::vector<double> p(static_cast<size_t>(E));
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[static_cast<size_t>(e)] = std::exp(x[e] - mx));
    for (auto& v : p) v /= sum;
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += p[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      out.ids.push_back(e);
      double w = p[static_cast<size_t>(e)];
      if (normalize) w /= chosen;
      if (scale != 0.0f && scale != 1.0f) w *= scale;
      out.w.push_back(static_cast<float>(w));
    }
  }
  return out;
}

TEST(MoeOps, RouteMatchesSoftmaxTopK) {
  // 8 experts (one AVX2 vector, half an AVX-512 one: the scalar tail), 20 (a vector and a
  // tail), 256 (Qwen3.5-35B-A3B's count).
  for (const auto& [E, k] : {std::pair<int64_t, int64_t>{8, 2}, {20, 4}, {256, 8}, {6, 6}}) {
    const int64_t n = 9;
    auto logits = randn(static_cast<size_t>(n * E), static_cast<uint32_t>(E), 2.0f);
    for (const bool normalize : {true, false}) {
      for (const float scale : {0.0f, 2.5f}) {
        const Route want = ref_route(logits, E, k, normalize, scale);
        for (auto isa : isas()) {
          SCOPED_TRACE("E " + std::to_string(E) + " k " + std::to_string(k) + " isa " +
                       std::string(cpu::isa_name(isa)) + (normalize ? " normalised" : "") +
                       " scale " + std::to_string(scale));
          cpu::CpuBackend b({2, isa});
          std::vector<int32_t> ids(static_cast<size_t>(n * k), -1);
          std::vector<float> w(static_cast<size_t>(n * k));
          b.moe_route(view(logits, E), normalize, scale, view_i32(ids, k), view(w, k));
          EXPECT_EQ(ids, want.ids);
          EXPECT_LT(nerr(want.w, w), 1e-12);
          if (normalize && scale == 0.0f) {
            for (int64_t r = 0; r < n; ++r) {
              double s = 0;
              for (int64_t j = 0; j < k; ++j) s += w[static_cast<size_t>(r * k + j)];
              EXPECT_NEAR(s, 1.0, 1e-6);
            }
          }
        }
      }
    }
  }
}

TEST(MoeOps, RouteTiesPickTheLowerIndex) {
  const int64_t E = 8, k = 3;
  std::vector<float> logits = {1, 3, 3, 0, 3, 2, 2, 1};
  cpu::CpuBackend b({1, cpu::best_isa()});
  std::vector<int32_t> ids(k);
  std::vector<float> w(k);
  b.moe_route(view(logits, E), true, 0.0f, view_i32(ids, k), view(w, k));
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
}

TEST(MoeOps, RouteRejectsBadShapes) {
  std::vector<float> logits(16), w(3);
  std::vector<int32_t> ids(3);
  cpu::CpuBackend b({1, cpu::Isa::SCALAR});
  EXPECT_THROW(b.moe_route(view(logits, 8), true, 0, view_i32(ids, 3), view(w, 3)), Error);  // 2 rows, 1 out
  std::vector<float> one(4);
  std::vector<int32_t> ids5(5);
  std::vector<float> w5(5);
  EXPECT_THROW(b.moe_route(view(one, 4), true, 0, view_i32(ids5, 5), view(w5, 5)), Error);  // k > E
}

// Random weight bytes of a type, quantised from normals.
std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto v = randn(static_cast<size_t>(rows * cols), seed);
  const size_t rb = row_bytes(t, cols);
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) cpu::quantize_row_ref(t, v.data() + r * cols, out.data() + rb * r, cols);
  return out;
}

// Random routing of n rows to k distinct experts of E, some experts unused.
std::vector<int32_t> random_ids(int64_t n, int64_t k, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int32_t> all(static_cast<size_t>(E));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  return ids;
}

TEST(MoeOps, MatmulIdEqualsDenseMatmulPerExpert) {
  const int64_t E = 6, m = 48, cols = 256;
  for (const GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
                           GgmlType::Q4_K, GgmlType::Q6_K}) {
    auto Wbytes = random_weights(t, E * m, cols, 7);
    for (auto isa : isas()) {
      cpu::CpuBackend b({2, isa});
      const Tensor W = b.weight(t, cols, E * m, Wbytes.data());
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1, 2}, {5, 3}, {70, 2}, {3, 6}}) {
        for (const bool shared_x : {true, false}) {
          SCOPED_TRACE(std::string(type_name(t)) + " isa " + std::string(cpu::isa_name(isa)) + " n " +
                       std::to_string(n) + " k " + std::to_string(k) + (shared_x ? " shared x" : " x per slot"));
          auto x = randn(static_cast<size_t>((shared_x ? n : n * k) * cols), static_cast<uint32_t>(n * 31 + k));
          auto ids = random_ids(n, k, E, static_cast<uint32_t>(n + k));
          std::vector<float> y(static_cast<size_t>(n * k * m), NAN);
          b.matmul_id(W, E, view(x, cols), view_i32(ids, k), view(y, m));
          // reference 1: for each expert, the dense matmul of the rows routed to it, in batch order
          std::vector<float> want(y.size(), NAN);
          for (int32_t e = 0; e < E; ++e) {
            std::vector<int64_t> slots;
            for (int64_t s = 0; s < n * k; ++s)
              if (ids[static_cast<size_t>(s)] == e) slots.push_back(s);
            if (slots.empty()) continue;
            std::vector<float> xe, ye(slots.size() * static_cast<size_t>(m));
            for (int64_t s : slots) {
              const float* src = x.data() + (shared_x ? s / k : s) * cols;
              xe.insert(xe.end(), src, src + cols);
            }
            b.matmul(W.slice_rows(e * m, m), view(xe, cols), view(ye, m));
            for (size_t i = 0; i < slots.size(); ++i)
              std::memcpy(want.data() + slots[i] * m, ye.data() + i * m, static_cast<size_t>(m) * sizeof(float));
          }
          ASSERT_EQ(std::memcmp(want.data(), y.data(), y.size() * sizeof(float)), 0)
              << "matmul_id differs from the dense matmul of each expert's rows";
          // reference 2: one row at a time (the decode path). Calls of at most exact_rows (8)
          // tokens use the one-row kernels, so their bits do not depend on the row count;
          // larger ones the multi-row tiles, which may sum in another order (F32 does).
          for (int64_t s = 0; s < n * k; s += 3) {
            std::vector<float> xr(x.begin() + (shared_x ? s / k : s) * cols, x.begin() + ((shared_x ? s / k : s) + 1) * cols);
            std::vector<float> yr(static_cast<size_t>(m));
            b.matmul(W.slice_rows(ids[static_cast<size_t>(s)] * m, m), view(xr, cols), view(yr, m));
            std::vector<float> got(y.begin() + s * m, y.begin() + (s + 1) * m);
            EXPECT_LT(nerr(yr, got), 1e-12) << "slot " << s << " differs from a one-row matmul";
            if (n <= 8) {
              EXPECT_EQ(yr, got) << "a call of at most 8 tokens must give the one-row bits";
            }
          }
        }
      }
    }
  }
}

TEST(MoeOps, MatmulIdRejectsBadInput) {
  const int64_t E = 4, m = 8, cols = 32;
  std::vector<float> Wf(static_cast<size_t>(E * m * cols)), x(static_cast<size_t>(2 * cols)), y(static_cast<size_t>(4 * m));
  cpu::CpuBackend b({1, cpu::Isa::SCALAR});
  const Tensor W = b.weight(GgmlType::F32, cols, E * m, Wf.data());
  std::vector<int32_t> bad = {0, 4, 1, 2};
  EXPECT_THROW(b.matmul_id(W, E, view(x, cols), view_i32(bad, 2), view(y, m)), Error);  // id 4 of 4 experts
  std::vector<int32_t> ok = {0, 3, 1, 2};
  EXPECT_THROW(b.matmul_id(W, 3, view(x, cols), view_i32(ok, 2), view(y, m)), Error);   // 32 rows / 3 experts
  std::vector<float> y_short(static_cast<size_t>(3 * m));
  EXPECT_THROW(b.matmul_id(W, E, view(x, cols), view_i32(ok, 2), view(y_short, m)), Error);
}

TEST(MoeOps, CombineSumsInSlotOrderWithSharedExpert) {
  const int64_t n = 5, k = 3, d = 40;
  auto e = randn(static_cast<size_t>(n * k * d), 1);
  auto w = randn(static_cast<size_t>(n * k), 2);
  auto sh = randn(static_cast<size_t>(n * d), 3);
  auto g = randn(static_cast<size_t>(n), 4);
  std::vector<float> want(static_cast<size_t>(n * d)), want_sh(want.size());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) {
      float acc = e[static_cast<size_t>((r * k) * d + i)] * w[static_cast<size_t>(r * k)];
      for (int64_t j = 1; j < k; ++j) {
        const float term = e[static_cast<size_t>((r * k + j) * d + i)] * w[static_cast<size_t>(r * k + j)];
        acc = acc + term;
      }
      want[static_cast<size_t>(r * d + i)] = acc;
      const float term = sh[static_cast<size_t>(r * d + i)] * g[static_cast<size_t>(r)];
      want_sh[static_cast<size_t>(r * d + i)] = acc + term;
    }
  for (auto isa : isas()) {
    cpu::CpuBackend b({2, isa});
    std::vector<float> out(want.size());
    b.moe_combine(view(e, d), view(w, k), Tensor{}, Tensor{}, view(out, d));
    EXPECT_EQ(out, want);
    b.moe_combine(view(e, d), view(w, k), view(sh, d), view(g, 1), view(out, d));
    EXPECT_EQ(out, want_sh);
  }
}

}  // namespace
}  // namespace df
