// Load-time repacked layouts (quant/cpu/repack.h, issue 15): for any number of activation
// rows, any row range (tiles cut at both ends) and odd block counts, every output of the
// repacked kernel has the bits of its format's one order (scalar references below, close to
// the planar kernels' ggml order). The CPU backend: repack on gives the reference's bits,
// close to off's; a row's bits do not depend on how many rows the call has; a view of
// other rows of a repacked weight multiplies its planar rows.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <string>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "kernel_test_util.h"
#include "op_test_util.h"
#include "quant/blocks.h"
#include "quant/cpu/repack.h"
#include "quant/formats_kquant.h"
#include "quant/types.h"
#include "test_util.h"

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

// Q4_0 in llama.cpp's repacked order: per block the exact integer sum, then
// acc = fma(fp16(d_w) * fp16(d_a), float(isum), acc); one chain, no horizontal sum.
float q4_0_repacked_order(int64_t k, const uint8_t* w_row, const uint8_t* act_row) {
  const auto* w = reinterpret_cast<const df::BlockQ4_0*>(w_row);
  const auto* a = reinterpret_cast<const df::BlockQ8_0*>(act_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < 16; ++i) {
      isum += ((w[b].qs[i] & 15) - 8) * a[b].qs[i];
      isum += ((w[b].qs[i] >> 4) - 8) * a[b].qs[i + 16];
    }
    const float s = df::fp16_to_fp32(w[b].d) * df::fp16_to_fp32(a[b].d);
    acc = std::fma(s, static_cast<float>(isum), acc);
  }
  return acc;
}

// Q8_0 in the same order as Q4_0 above.
float q8_0_repacked_order(int64_t k, const uint8_t* w_row, const uint8_t* act_row) {
  const auto* w = reinterpret_cast<const df::BlockQ8_0*>(w_row);
  const auto* a = reinterpret_cast<const df::BlockQ8_0*>(act_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) isum += w[b].qs[i] * a[b].qs[i];
    const float s = df::fp16_to_fp32(w[b].d) * df::fp16_to_fp32(a[b].d);
    acc = std::fma(s, static_cast<float>(isum), acc);
  }
  return acc;
}

// Q4_K in the repacked order: per super-block the exact integer sums of the scaled products
// and of the mins times the sub-blocks' activation sums, two f32 chains, their difference.
float q4_K_repacked_order(int64_t k, const uint8_t* w_row, const uint8_t* act_row) {
  const auto* w = reinterpret_cast<const df::BlockQ4_K*>(w_row);
  const auto* a = reinterpret_cast<const df::BlockQ8_K*>(act_row);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    int32_t isum = 0, msum = 0;
    for (int v = 0; v < 8; ++v) {
      uint8_t sc, m;
      df::quant::scale_min_k4(w[b].scales, v, sc, m);
      int32_t dot = 0, asum = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = w[b].qs[32 * (v / 2) + l];
        const int q = v % 2 ? byte >> 4 : byte & 15;
        dot += q * a[b].qs[32 * v + l];
        asum += a[b].qs[32 * v + l];
      }
      isum += sc * dot;
      msum += m * asum;
    }
    acc = std::fma(df::fp16_to_fp32(w[b].d) * a[b].d, static_cast<float>(isum), acc);
    accm = std::fma(df::fp16_to_fp32(w[b].dmin) * a[b].d, static_cast<float>(msum), accm);
  }
  return acc - accm;
}

// Q6_K in the repacked order: per super-block the exact integer sum of sc * (q - 32) * a, one
// f32 chain.
float q6_K_repacked_order(int64_t k, const uint8_t* w_row, const uint8_t* act_row) {
  const auto* w = reinterpret_cast<const df::BlockQ6_K*>(w_row);
  const auto* a = reinterpret_cast<const df::BlockQ8_K*>(act_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < k / 256; ++b) {
    int32_t isum = 0;
    for (int e = 0; e < 256; ++e) {
      const int v = e / 32, i = e % 32, c = v / 4, j = v % 4;
      const uint8_t l = w[b].ql[64 * c + 32 * (j % 2) + i];
      const int q = ((j < 2 ? l & 15 : l >> 4) | ((w[b].qh[32 * c + i] >> (2 * j)) & 3) << 4) - 32;
      isum += w[b].scales[e / 16] * q * a[b].qs[e];
    }
    acc = std::fma(df::fp16_to_fp32(w[b].d) * a[b].d, static_cast<float>(isum), acc);
  }
  return acc;
}

float repacked_order(GgmlType t, int64_t k, const uint8_t* w_row, const uint8_t* act_row) {
  if (t == GgmlType::Q4_0) return q4_0_repacked_order(k, w_row, act_row);
  if (t == GgmlType::Q8_0) return q8_0_repacked_order(k, w_row, act_row);
  if (t == GgmlType::Q4_K) return q4_K_repacked_order(k, w_row, act_row);
  return q6_K_repacked_order(k, w_row, act_row);
}

struct Case {
  GgmlType type;
  std::vector<int64_t> ks;  // row lengths: odd block counts included
};

TEST(Repack, RepackedKernelHasItsOrderForEveryTile) {
  const Isa isa = Isa::AVX512;
  if (!df::cpu::repack_supported(isa, GgmlType::Q4_0, 512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const auto& K = df::cpu::kernels(isa);  // the planar kernels
  uint32_t seed = 11;
  for (const Case& cs : {Case{GgmlType::Q4_0, {512, 544, 1056}}, Case{GgmlType::Q8_0, {512, 544, 1056}},
                         Case{GgmlType::Q4_K, {256, 768, 1280}},
                         Case{GgmlType::Q6_K, {256, 768, 1280}}})
    for (int64_t k : cs.ks)
    for (int64_t m : {8, 13, 40, 50}) {
      const GgmlType t = cs.type;
      ASSERT_TRUE(df::cpu::repack_supported(isa, t, k));
      const auto W = weight_rows(t, m, k, seed++);
      const size_t ws = df::row_bytes(t, k);
      std::vector<uint8_t> Wr(df::cpu::repacked_bytes(t, k, m));
      const int64_t G = df::cpu::repack_group_rows(t);
      // written in two calls, as the backend's pool does
      const int64_t mid = m > G ? G : m;
      df::cpu::repack_rows(t, k, m, W.data(), ws, 0, mid, Wr.data());
      if (mid < m) df::cpu::repack_rows(t, k, m, W.data(), ws, mid, m, Wr.data());
      for (int64_t n_act : {1, 2, 3, 4, 5, 7, 9, 17}) {
        const auto A = act_rows(isa, t, n_act, k, seed++);
        const size_t as = df::cpu::act_row_bytes(t, k);
        std::vector<float> want(static_cast<size_t>(n_act * m)), exact(want.size()), got(want.size());
        // the planar kernels (ggml's order) are close: the same products, other f32 sums
        for (int64_t r = 0; r < n_act; ++r)
          for (int64_t i = 0; i < m; ++i)
            want[r * m + i] = repacked_order(t, k, W.data() + i * ws, A.data() + r * as);
        K.gemm_exact(t, k, W.data(), ws, 0, m, A.data(), as, n_act, exact.data(), m);
        ASSERT_LT(df::test::normalised_error(exact, want), 1e-9);
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
            }
        }
      }
    }
}

TEST(Repack, UnsupportedIsAnError) {
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX2, GgmlType::Q4_0, 512));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q5_0, 512));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q8_0, 544 + 16));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q4_K, 544));
  EXPECT_FALSE(df::cpu::repack_supported(Isa::AVX512, GgmlType::Q5_K, 512));
  EXPECT_EQ(df::cpu::repack_min_rows(GgmlType::Q4_0), 1);
  EXPECT_EQ(df::cpu::repack_min_rows(GgmlType::Q6_K), 9);
  EXPECT_EQ(df::cpu::repack_min_rows(GgmlType::Q4_K), 9);
  EXPECT_THROW(df::cpu::repack_group_rows(GgmlType::Q5_0), df::Error);
  float y = 0;
  uint8_t w[64] = {}, a[64] = {};
  EXPECT_THROW(df::cpu::gemm_repacked(Isa::AVX2, GgmlType::Q4_0, 32, w, 1, 0, 1, a, 34, 1, &y, 1), df::Error);
}

// The backend end to end, for decode, verify and prefill row counts (over the 64-row
// activation blocks), two threads, a row count that is no multiple of 16: repack on
// gives the repacked-order reference's bits, close to off's (the planar kernels), from
// repack_min_rows on (Q6_K: fewer rows run the planar kernels, off's bits); with it, every row
// of an n-row call has the bits of that row multiplied alone (Q6_K: up to 8 rows); a view of some rows of a repacked weight multiplies the planar rows (off's bits).
TEST(Repack, BackendOnAndOff) {
  if (!df::cpu::repack_supported(df::cpu::best_isa(), GgmlType::Q4_0, 512)) GTEST_SKIP() << "no AVX-512";
  // Q8_0 without repack_q8_0: its planar kernels over a copy of its rows (off's bits)
  for (auto [t, q8] : {std::pair{GgmlType::Q4_0, false}, {GgmlType::Q8_0, true}, {GgmlType::Q8_0, false},
                       {GgmlType::Q4_K, false}, {GgmlType::Q6_K, false}}) {
    SCOPED_TRACE(std::string(df::type_name(t)) + (q8 ? " repack_q8_0" : ""));
    const int64_t k = 512, m = 104;
    const auto W = weight_rows(t, m, k, 5);
    df::cpu::CpuOptions on, off;
    on.threads = off.threads = 2;
    on.repack = true;
    on.repack_q8_0 = q8;
    off.repack = false;
    df::cpu::CpuBackend bon(on), boff(off);
    const df::Tensor won = bon.weight(t, k, m, W.data()), woff = boff.weight(t, k, m, W.data());
    EXPECT_GT(bon.repacked_bytes(), 0u);
    EXPECT_EQ(boff.repacked_bytes(), 0u);
    {  // rows no multiple of 8 stay planar, as llama.cpp leaves them (repack.cpp: ne[1] % 8)
      df::cpu::CpuBackend b(on);
      b.weight(t, k, 100, W.data());
      EXPECT_EQ(b.repacked_bytes(), 0u);
    }
    std::mt19937 rng(3);
    for (int64_t n : {1, 3, 8, 70}) {
      for (bool exact : {false, true}) {
        bon.set_row_exact(exact);
        boff.set_row_exact(exact);
        const auto x = df::test::gaussian(rng, static_cast<size_t>(n * k));
        // y[r * rows + i] of W (or a view) times rows [r0, r0 + nr) of x
        auto run = [&](df::cpu::CpuBackend& b, const df::Tensor& Wt, int64_t r0, int64_t nr) {
          auto xb = b.alloc(static_cast<size_t>(nr * k) * 4), yb = b.alloc(static_cast<size_t>(nr * Wt.rows) * 4);
          df::Tensor xt{xb->data(), GgmlType::F32, k, nr, static_cast<size_t>(k) * 4};
          df::Tensor yt{yb->data(), GgmlType::F32, Wt.rows, nr, static_cast<size_t>(Wt.rows) * 4};
          b.upload(xt, x.data() + r0 * k, static_cast<size_t>(nr * k) * 4);
          b.matmul(Wt, xt, yt);
          std::vector<float> y(static_cast<size_t>(nr * Wt.rows));
          b.download(yt, y.data(), y.size() * 4);
          return y;
        };
        auto bits = [](const std::vector<float>& v) {
          std::vector<uint32_t> u(v.size());
          for (size_t i = 0; i < v.size(); ++i) u[i] = std::bit_cast<uint32_t>(v[i]);
          return u;
        };
        const auto yon = run(bon, won, 0, n), yoff = run(boff, woff, 0, n);
        if (n < df::cpu::repack_min_rows(t) || (t == GgmlType::Q8_0 && !q8)) {  // the planar kernels
          EXPECT_EQ(bits(yon), bits(yoff)) << df::type_name(t) << " n " << n;
        } else {
          EXPECT_LT(df::test::normalised_error(yoff, yon), 1e-9) << "n " << n;
          const size_t as = df::cpu::act_row_bytes(t, k);
          std::vector<uint8_t> a(as);
          const size_t ws = df::row_bytes(t, k);
          for (int64_t r = 0; r < n; ++r) {
            df::cpu::kernels(df::cpu::best_isa()).quantize_act(t, x.data() + r * k, a.data(), k);
            for (int64_t i = 0; i < m; ++i)
              ASSERT_EQ(std::bit_cast<uint32_t>(yon[r * m + i]),
                        std::bit_cast<uint32_t>(repacked_order(t, k, W.data() + i * ws, a.data())))
                  << "n " << n << " out (" << r << ", " << i << ")";
          }
        }
        // row-count independence (formats with repack_min_rows > 1: up to 8 rows, as the planar
        // kernels of row-exact mode; planar Q8_0: in row-exact mode, up to 8 rows)
        const bool planar_q8 = t == GgmlType::Q8_0 && !q8;
        for (int64_t r = 0; r < n && (planar_q8 ? exact && n <= 8 : df::cpu::repack_min_rows(t) == 1 || n <= 8); r += 3) {
          const auto alone = run(bon, won, r, 1);
          EXPECT_EQ(bits(alone), bits(std::vector<float>(yon.begin() + r * m, yon.begin() + (r + 1) * m)))
              << df::type_name(t) << " n " << n << " row " << r;
        }
        const df::Tensor view_on = won.slice_rows(0, 40), view_off = woff.slice_rows(0, 40);
        EXPECT_EQ(bits(run(bon, view_on, 0, n)), bits(run(boff, view_off, 0, n))) << "view, n " << n;
      }
    }
  }
}

// A backend outlives its models: bytes that a copy was made of may be freed and reused by a later
// load (the fuzz_model target found it: an F32 matrix at the address of an earlier Q8_0 one read
// past the old copy), or a corrupt file may put two tensors at one offset. weight() of the new
// tensor never reuses the old copy: the product is that of a backend that never saw the old one.
TEST(Repack, ReusedBytesNeverGetAnOlderCopy) {
  if (!df::cpu::repack_supported(df::cpu::best_isa(), GgmlType::Q4_0, 512)) GTEST_SKIP() << "no AVX-512";
  const int64_t k = 512, m = 16, n = 3;
  df::cpu::CpuOptions on;
  on.threads = 1;
  on.repack = true;
  std::mt19937 rng(9);
  const auto x = df::test::gaussian(rng, static_cast<size_t>(n * k));
  auto product = [&](df::cpu::CpuBackend& b, const df::Tensor& W) {
    auto xb = b.alloc(static_cast<size_t>(n * k) * 4), yb = b.alloc(static_cast<size_t>(n * W.rows) * 4);
    df::Tensor xt{xb->data(), GgmlType::F32, k, n, static_cast<size_t>(k) * 4};
    df::Tensor yt{yb->data(), GgmlType::F32, W.rows, n, static_cast<size_t>(W.rows) * 4};
    b.upload(xt, x.data(), static_cast<size_t>(n * k) * 4);
    b.matmul(W, xt, yt);
    std::vector<float> y(static_cast<size_t>(n * W.rows));
    b.download(yt, y.data(), y.size() * 4);
    return y;
  };
  // room for the largest of the matrices below (F32 rows)
  std::vector<uint8_t> bytes(static_cast<size_t>(m * k) * 4);
  for (auto [first, second] : {std::pair{GgmlType::Q8_0, GgmlType::F32}, {GgmlType::Q4_0, GgmlType::Q4_0},
                               {GgmlType::Q4_K, GgmlType::Q8_0}}) {
    SCOPED_TRACE(std::string(df::type_name(first)) + " then " + std::string(df::type_name(second)));
    df::cpu::CpuBackend b(on);
    const auto W1 = weight_rows(first, m, k, 1), W2 = weight_rows(second, m, k, 2);
    std::memcpy(bytes.data(), W1.data(), W1.size());
    const df::Tensor w1 = b.weight(first, k, m, bytes.data());
    (void)product(b, w1);
    std::memcpy(bytes.data(), W2.data(), W2.size());  // the bytes reused by another load
    const df::Tensor w2 = b.weight(second, k, m, bytes.data());
    df::cpu::CpuBackend fresh(on);
    const df::Tensor w2f = fresh.weight(second, k, m, bytes.data());
    const auto y = product(b, w2), yf = product(fresh, w2f);
    ASSERT_EQ(y.size(), yf.size());
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(yf[i])) << i;
  }
}

// An expert stack (weight_stack) is repacked as a whole: matmul_id gives each expert's rows
// the bits of that expert's matrix loaded alone (weight(), repacked) times the same rows, for
// experts with few rows (Q4_K, Q6_K: the planar kernels over the huge-page copy) and many;
// repack off gives the planar kernels' bits.
TEST(Repack, ExpertStackThroughMatmulId) {
  if (!df::cpu::repack_supported(df::cpu::best_isa(), GgmlType::Q4_0, 256)) GTEST_SKIP() << "no AVX-512";
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    SCOPED_TRACE(df::type_name(t));
    const int64_t E = 3, m = 32, k = 256, n = 14, used = 2;
    const auto W = weight_rows(t, E * m, k, 9);
    const size_t ebytes = df::row_bytes(t, k) * m;
    // row r uses experts (0 or 1, 2): expert 0 gets 5 rows, 1 gets 9, 2 gets 14
    std::vector<int32_t> ids;
    for (int64_t r = 0; r < n; ++r) {
      ids.push_back(r % 3 == 0 ? 0 : 1);
      ids.push_back(2);
    }
    std::mt19937 rng(4);
    auto x = df::test::gaussian(rng, static_cast<size_t>(n * k));
    for (bool repack : {true, false}) {
      df::cpu::CpuOptions o;
      o.threads = 2;
      o.repack = repack;
      df::cpu::CpuBackend b(o);
      const df::Tensor Ws = b.weight_stack(t, k, m, E, W.data());
      EXPECT_EQ(b.repacked_bytes() > 0, repack);
      std::vector<float> y(static_cast<size_t>(n * used * m), NAN);
      b.matmul_id(Ws, E, df::optest::view(x, k), df::optest::view_i32(ids, used), df::optest::view(y, m));
      for (int32_t e = 0; e < E; ++e) {
        df::cpu::CpuBackend be(o);
        const df::Tensor We = be.weight(t, k, m, W.data() + ebytes * static_cast<size_t>(e));
        std::vector<float> xe;
        std::vector<int64_t> slots;
        for (int64_t s = 0; s < n * used; ++s)
          if (ids[static_cast<size_t>(s)] == e) {
            slots.push_back(s);
            xe.insert(xe.end(), x.begin() + s / used * k, x.begin() + (s / used + 1) * k);
          }
        std::vector<float> ye(slots.size() * static_cast<size_t>(m));
        be.matmul(We, df::optest::view(xe, k), df::optest::view(ye, m));
        for (size_t i = 0; i < slots.size(); ++i)
          ASSERT_EQ(std::memcmp(ye.data() + i * m, y.data() + slots[i] * m, m * sizeof(float)), 0)
              << "expert " << e << " (" << slots.size() << " rows) slot " << slots[i] << " repack " << repack;
      }
    }
  }
}

// The flag through the CLI: a Q4_0 model's logits with --cpu-repack on and off differ (the
// flag takes effect: another summation order) by rounding only; on is the default; a bad
// value is an error.
TEST(Repack, CliFlag) {
  if (!df::cpu::repack_supported(df::cpu::best_isa(), GgmlType::Q4_0, 256)) GTEST_SKIP() << "no AVX-512";
  const std::string dir = df::testutil::test_dir(DF_UNIT_WORK_DIR);
  const std::string model = df::testutil::make_model_in(
      dir, "repack_q4_0", "--layers 1 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 --type q4_0 --seed 3");
  auto logits = [&](const std::string& flag) {
    const std::string out = dir + "/repack_logits.f32";
    const auto r = df::testutil::run_status(std::string(DF_CLI) + " logits -q -t 1 -m " + model +
                                            " -p 'the quick brown fox' -o " + out + " " + flag + " 2>&1 </dev/null");
    EXPECT_EQ(r.rc, 0) << r.out;
    const std::string bytes = df::testutil::read_file(out);
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  };
  const auto on = logits("--cpu-repack on"), off = logits("--cpu-repack off"), dflt = logits("");
  ASSERT_FALSE(on.empty());
  ASSERT_EQ(on.size(), off.size());
  EXPECT_EQ(on, dflt);  // on is the default
  EXPECT_NE(on, off);
  EXPECT_LT(df::test::normalised_error(off, on), 1e-4);  // a wrong kernel: order 1
  const auto bad = df::testutil::run_status(std::string(DF_CLI) + " logits -q -m " + model + " -p hi -o " + dir +
                                            "/x.f32 --cpu-repack maybe 2>&1 </dev/null");
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("--cpu-repack"), std::string::npos) << bad.out;
}

}  // namespace
