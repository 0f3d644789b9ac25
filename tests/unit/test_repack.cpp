// Load-time repacked layouts (quant/cpu/repack.h, issue 15): the repacked kernel gives every
// output the bits of the planar decode kernel (vec_dot, gemm_exact, gemm) for any number of
// activation rows, any row range (tiles cut at both ends) and odd block counts; the CPU
// backend gives the same matmul bits with --cpu-repack on and off, and a view of other rows
// of a repacked weight multiplies its planar rows.
#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "kernel_test_util.h"
#include "quant/cpu/repack.h"

namespace {

using df::GgmlType;
using df::cpu::Isa;

std::vector<uint8_t> weight_rows(GgmlType t, int64_t rows, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto wf = df::test::gaussian(rng, static_cast<size_t>(rows * k));
  const size_t stride = df::row_bytes(t, k);
  std::vector<uint8_t> W(stride * rows);
  for (int64_t i = 0; i < rows; ++i) df::cpu::quantize_row_ref(t, wf.data() + i * k, W.data() + i * stride, k);
  return W;
}

std::vector<uint8_t> act_rows(Isa isa, GgmlType t, int64_t n_act, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto x = df::test::gaussian(rng, static_cast<size_t>(n_act * k), 3.0f);
  const size_t stride = df::cpu::act_row_bytes(t, k);
  std::vector<uint8_t> a(stride * n_act);
  for (int64_t r = 0; r < n_act; ++r)
    df::cpu::kernels(isa).quantize_act(t, x.data() + r * k, a.data() + r * stride, k);
  return a;
}

struct Case {
  GgmlType type;
  std::vector<int64_t> ks;  // row lengths: odd block counts included
};

TEST(Repack, RepackedEqualsPlanarBits) {
  const Isa isa = Isa::AVX512;
  if (!df::cpu::repack_supported(isa, GgmlType::Q4_0, 512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const auto& K = df::cpu::kernels(isa);
  uint32_t seed = 11;
  for (const Case& cs : {Case{GgmlType::Q4_0, {512, 544, 1056}}, Case{GgmlType::Q4_K, {256, 768, 1280}}})
    for (int64_t k : cs.ks)
    for (int64_t m : {8, 13, 40}) {
      const GgmlType t = cs.type;
      ASSERT_TRUE(df::cpu::repack_supported(isa, t, k));
      const auto W = weight_rows(t, m, k, seed++);
      const size_t ws = df::row_bytes(t, k);
      std::vector<uint8_t> Wr(df::cpu::repacked_bytes(t, k, m));
      const int64_t G = df::cpu::repack_group_rows(t);
      // written in two calls, as the backend's pool does
      const int64_t mid = m > G ? G : m;
      df::cpu::repack_rows(t, k, m, W.data(), ws, 0, mid, Wr.data());
      df::cpu::repack_rows(t, k, m, W.data(), ws, mid, m, Wr.data());
      for (int64_t n_act : {1, 2, 3, 4, 5, 7, 9, 17}) {
        const auto A = act_rows(isa, t, n_act, k, seed++);
        const size_t as = df::cpu::act_row_bytes(t, k);
        std::vector<float> want(static_cast<size_t>(n_act * m)), exact(want.size()), got(want.size());
        for (int64_t r = 0; r < n_act; ++r)
          for (int64_t i = 0; i < m; ++i)
            want[r * m + i] = K.vec_dot(t, k, W.data() + i * ws, A.data() + r * as);
        K.gemm_exact(t, k, W.data(), ws, 0, m, A.data(), as, n_act, exact.data(), m);
        for (auto [i0, i1] : {std::pair<int64_t, int64_t>{0, m}, {3, m - 2}, {m - 1, m}}) {
          std::fill(got.begin(), got.end(), -1.0f);
          df::cpu::gemm_repacked(isa, t, k, Wr.data(), m, i0, i1, A.data(), as, n_act, got.data(), m);
          for (int64_t r = 0; r < n_act; ++r)
            for (int64_t i = 0; i < m; ++i) {
              const size_t j = static_cast<size_t>(r * m + i);
              if (i < i0 || i >= i1) {
                ASSERT_EQ(got[j], -1.0f) << "wrote outside [i0, i1): row " << i;
                continue;
              }
              ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(want[j]))
                  << df::type_name(t) << " k " << k << " m " << m << " n_act " << n_act << " [" << i0 << ", " << i1 << ") out (" << r
                  << ", " << i << "): " << got[j] << " vs vec_dot " << want[j];
              ASSERT_EQ(std::bit_cast<uint32_t>(exact[j]), std::bit_cast<uint32_t>(want[j]));
            }
        }
      }
    }
}

TEST(Repack, UnsupportedIsAnError) {
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX2, GgmlType::Q4_0, 512));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q8_0, 512));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q4_K, 544));
  EXPECT_THROW(df::cpu::repack_group_rows(GgmlType::Q8_0), df::Error);
  float y = 0;
  uint8_t w[64] = {}, a[64] = {};
  EXPECT_THROW(df::cpu::gemm_repacked(Isa::AVX2, GgmlType::Q4_0, 32, w, 1, 0, 1, a, 34, 1, &y, 1), df::Error);
}

// The backend end to end: matmul with repack on equals repack off bit for bit, for decode,
// verify and prefill row counts (over the 64-row activation blocks), several threads, a row
// count that is no multiple of 8 or 16, and a view of some rows of the repacked weight.
TEST(Repack, BackendOnEqualsOff) {
  if (!df::cpu::repack_supported(df::cpu::best_isa(), GgmlType::Q4_0, 512)) GTEST_SKIP() << "no AVX-512";
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K}) {
  const int64_t k = 512, m = 100;
  const auto W = weight_rows(t, m, k, 5);
  df::cpu::CpuOptions on, off;
  on.threads = off.threads = 2;
  off.repack = false;
  df::cpu::CpuBackend bon(on), boff(off);
  const df::Tensor won = bon.weight(t, k, m, W.data()), woff = boff.weight(t, k, m, W.data());
  EXPECT_GT(bon.repacked_bytes(), 0u);
  EXPECT_EQ(boff.repacked_bytes(), 0u);
  std::mt19937 rng(3);
  for (int64_t n : {1, 3, 8, 70}) {
    for (bool exact : {false, true}) {
      bon.set_row_exact(exact);
      boff.set_row_exact(exact);
      auto x = df::test::gaussian(rng, static_cast<size_t>(n * k));
      auto run = [&](df::cpu::CpuBackend& b, const df::Tensor& Wt) {
        auto xb = b.alloc(x.size() * 4), yb = b.alloc(static_cast<size_t>(n * Wt.rows) * 4);
        df::Tensor xt{xb->data(), GgmlType::F32, k, n, static_cast<size_t>(k) * 4};
        df::Tensor yt{yb->data(), GgmlType::F32, Wt.rows, n, static_cast<size_t>(Wt.rows) * 4};
        b.upload(xt, x.data(), x.size() * 4);
        b.matmul(Wt, xt, yt);
        std::vector<uint32_t> y(static_cast<size_t>(n * Wt.rows));
        b.download(yt, y.data(), y.size() * 4);
        return y;
      };
      EXPECT_EQ(run(bon, won), run(boff, woff)) << "n " << n << " exact " << exact;
      const df::Tensor view_on = won.slice_rows(0, 40), view_off = woff.slice_rows(0, 40);
      EXPECT_EQ(run(bon, view_on), run(boff, view_off)) << "view, n " << n;
    }
  }
  }
}

}  // namespace
