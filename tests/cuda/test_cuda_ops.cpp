// Every op of the CUDA backend against the CPU backend (SCALAR kernels) on the same random
// inputs, with a normalised error budget per op: nerr = mse(cpu, cuda) / mse(cpu, 0).
// Budgets: plain f32 arithmetic 1e-10 (only summation order and libm differ); products with
// weights or caches the CPU rounds its activations for (F16 1e-6, BF16 and 8-bit blocks
// 1e-4, 4/5-bit blocks 1e-4; the GPU keeps f32 activations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "../unit/op_test_util.h"
#include "cuda_test_util.h"
#include "common/error.h"
#include "quant/cpu/kernels.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/delta_rule_chunked.cuh"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
using Outputs = std::vector<std::vector<float>>;

// Runs f on the CPU reference and on the GPU and checks each output's error.
void compare(const std::function<Outputs(Backend&)>& f, double budget, const std::string& what) {
  const Outputs ref = f(cpu_ref());
  const Outputs got = f(*gpu());
  ASSERT_EQ(ref.size(), got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(ref[i].size(), got[i].size()) << what;
    for (float v : got[i]) ASSERT_TRUE(std::isfinite(v)) << what << ": output " << i << " not finite";
    const double e = nerr(ref[i], got[i]);
    EXPECT_LE(e, budget) << what << ": output " << i;
  }
}

TEST(CudaOps, RmsNormAndPerHead) {
  DF_REQUIRE_GPU();
  for (int64_t cols : {64, 384, 5120}) {
    compare([&](Backend& b) -> Outputs {
      auto x = put_f32(b, randn(7 * cols, 1, 3.0f), cols);
      auto w = put_f32(b, randn(cols, 2), cols);
      auto y = put_f32(b, std::vector<float>(7 * cols), cols);
      b.rms_norm(x.t, w.t, 1e-6f, y.t);
      b.rms_norm(x.t.reshape(32), w.t.slice_cols(0, 32), 1e-6f, x.t.reshape(32));  // in place, per head
      return {get_f32(b, y.t), get_f32(b, x.t)};
    }, 1e-10, "rms_norm " + std::to_string(cols));
  }
}

TEST(CudaOps, MatmulTypesAndRowCounts) {
  DF_REQUIRE_GPU();
  struct Case { GgmlType t; double budget; };
  // n > 8 rows go through the tensor-core GEMM (gemm/gemm.cuh; CudaOptions::gemm_min_rows 8): x
  // and float weights are rounded to f16 (relative 2^-11), so the float formats' budget there is
  // 1e-6. With gemm_min_rows 16, 9..16 rows take the matvec in launches of <= 8 rows: the
  // one-row budgets.
  static std::unique_ptr<cuda::CudaBackend> rows16;
  if (!rows16) {
    cuda::CudaOptions o;
    o.gemm_min_rows = 16;
    rows16 = std::make_unique<cuda::CudaBackend>(o);
  }
  const Case cases[] = {{GgmlType::F32, 1e-10}, {GgmlType::F16, 1e-6}, {GgmlType::BF16, 1e-4},
                        {GgmlType::Q8_0, 1e-4}, {GgmlType::Q4_0, 1e-4}, {GgmlType::Q4_1, 1e-4},
                        {GgmlType::Q5_0, 1e-4}, {GgmlType::Q5_1, 1e-4}, {GgmlType::Q4_K, 1e-4},
                        {GgmlType::Q6_K, 1e-4}, {GgmlType::Q2_K, 1e-3}};
  const int64_t k = 256, m = 200;
  for (const Case& c : cases) {
    std::vector<uint8_t> wq(row_bytes(c.t, k) * m);
    const auto wf = randn(static_cast<size_t>(k * m), 7);
    for (int64_t r = 0; r < m; ++r)
      cpu::quantize_row_ref(c.t, wf.data() + r * k, wq.data() + row_bytes(c.t, k) * r, k);
    for (int64_t n : {1, 2, 5, 8, 9, 16, 17, 70, 300}) {
      const double budget = n > 8 ? std::max(c.budget, 1e-6) : c.budget;
      auto run = [&](Backend& b) -> Outputs {
        const Tensor W = b.weight(c.t, k, m, wq.data());
        auto x = put_f32(b, randn(static_cast<size_t>(n * k), 11 + n), k);
        auto y = put_f32(b, std::vector<float>(n * m, NAN), m);
        b.matmul(W, x.t, y.t);
        return {get_f32(b, y.t)};
      };
      compare(run, budget, std::string(type_name(c.t)) + " n=" + std::to_string(n));
      if (n > 8 && n <= 16) {  // the matvec in launches of <= 8 rows
        const Outputs ref = run(cpu_ref()), got = run(*rows16);
        for (float v : got[0]) ASSERT_TRUE(std::isfinite(v));
        EXPECT_LE(nerr(ref[0], got[0]), c.budget) << type_name(c.t) << " n=" << n << " by the matvec";
      }
    }
  }
}

TEST(CudaOps, GetRows) {
  DF_REQUIRE_GPU();
  const int64_t cols = 256, rows = 50;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q5_1,
                     GgmlType::Q4_K, GgmlType::Q6_K}) {
    std::vector<uint8_t> wq(row_bytes(t, cols) * rows);
    const auto wf = randn(static_cast<size_t>(cols * rows), 3);
    for (int64_t r = 0; r < rows; ++r)
      cpu::quantize_row_ref(t, wf.data() + r * cols, wq.data() + row_bytes(t, cols) * r, cols);
    const std::vector<int32_t> ids = {3, 0, 49, 3, 17};
    compare([&](Backend& b) -> Outputs {
      const Tensor table = b.weight(t, cols, rows, wq.data());
      auto out = put_f32(b, std::vector<float>(ids.size() * cols), cols);
      b.get_rows(table, put_i32(b, ids).t, out.t);
      return {get_f32(b, out.t)};
    }, 0.0, std::string("get_rows ") + std::string(type_name(t)));  // dequantization is exact
  }
}

TEST(CudaOps, RopePartialRotary) {
  DF_REQUIRE_GPU();
  for (int32_t n_rot : {64, 32}) {
    compare([&](Backend& b) -> Outputs {
      auto x = put_f32(b, randn(5 * 4 * 64, 4), 4 * 64);
      RopeParams rp;
      rp.n_head = 4, rp.head_dim = 64, rp.n_rot = n_rot, rp.freq_base = 1e6f;
      b.rope(x.t, positions(b, 1000, 5).t, rp);
      return {get_f32(b, x.t)};
    }, 1e-10, "rope n_rot=" + std::to_string(n_rot));
  }
}

TEST(CudaOps, RopeSections) {
  DF_REQUIRE_GPU();
  // IMROPE text sections: the same table on both backends (pairs of section 3 keep their
  // values), and on the GPU those pairs bit-equal to the input.
  RopeParams rp;
  rp.n_head = 2, rp.head_dim = 64, rp.n_rot = 32, rp.freq_base = 1e4f;
  rp.sections[0] = 2, rp.sections[1] = 2, rp.sections[2] = 2, rp.sections[3] = 2;
  const auto in = randn(3 * 2 * 64, 6);
  compare([&](Backend& b) -> Outputs {
    auto x = put_f32(b, in, 2 * 64);
    b.rope(x.t, positions(b, 40, 3).t, rp);
    return {get_f32(b, x.t)};
  }, 1e-10, "rope sections");
  cuda::CudaBackend& g = *gpu();
  auto x = put_f32(g, in, 2 * 64);
  g.rope(x.t, positions(g, 40, 3).t, rp);
  const auto got = get_f32(g, x.t);
  for (int r = 0; r < 3; ++r)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 16; ++i) {
        const int sector = i % 8;
        if (sector < 6) continue;  // sectors 6, 7: section 3 (3 * 2 = 6 <= sector)
        for (int d : {i, i + 16}) EXPECT_EQ(got[r * 128 + h * 64 + d], in[r * 128 + h * 64 + d]) << "pair " << i;
      }
}

// Fills the cache with `filled` positions, then attends n rows at positions filled - n ...
void attention_case(int32_t n_head, int32_t n_kv, int32_t hd, int64_t n_ctx, int64_t filled, int64_t n) {
  compare([&](Backend& b) -> Outputs {
    const int64_t kv = static_cast<int64_t>(n_kv) * hd, qd = static_cast<int64_t>(n_head) * hd;
    KvCache c = b.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
    auto k = put_f32(b, randn(static_cast<size_t>(filled * kv), 21), kv);
    auto v = put_f32(b, randn(static_cast<size_t>(filled * kv), 22), kv);
    b.kv_store(c, k.t, v.t, positions(b, 0, filled).t);
    auto q = put_f32(b, randn(static_cast<size_t>(n * qd), 23, 2.0f), qd);
    auto out = put_f32(b, std::vector<float>(n * qd, NAN), qd);
    AttentionParams p{n_head, n_kv, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
    b.attention(q.t, c, positions(b, filled - n, n).t, p, out.t);
    return {get_f32(b, out.t)};
  }, 1e-5, "attention heads " + std::to_string(n_head) + "/" + std::to_string(n_kv) + " hd " + std::to_string(hd) +
               " ctx " + std::to_string(n_ctx) + " filled " + std::to_string(filled) + " n " + std::to_string(n));
}

TEST(CudaOps, AttentionDecodeAndRows) {
  DF_REQUIRE_GPU();
  attention_case(6, 2, 64, 1024, 1, 1);       // first token
  attention_case(6, 2, 64, 1024, 700, 1);     // decode, several slices
  attention_case(8, 8, 128, 4096, 3000, 1);   // long context, many slices
  attention_case(4, 1, 256, 600, 37, 5);      // short verify batch
  attention_case(6, 2, 64, 512, 300, 70);     // prefill chunk (causal rows): flash_prefill
  attention_case(2, 2, 32, 64, 64, 64);       // full cache (head size 32: the decode kernel)
  attention_case(8, 2, 128, 1024, 200, 200);  // prefill from position 0, 4 row tiles (last partial)
  attention_case(4, 1, 256, 512, 330, 130);   // head size 256, prefill after a cached prefix
  attention_case(6, 6, 64, 256, 17, 17);      // smallest prefill batch
}

TEST(CudaOps, Elementwise) {
  DF_REQUIRE_GPU();
  const int64_t cols = 300, rows = 9;
  compare([&](Backend& b) -> Outputs {
    auto g = put_f32(b, randn(rows * cols, 31, 3.0f), cols);
    auto u = put_f32(b, randn(rows * cols, 32), cols);
    auto o = put_f32(b, std::vector<float>(rows * cols), cols);
    b.swiglu(g.t, u.t, o.t);
    auto s = put_f32(b, randn(rows * cols, 33), cols);
    b.sigmoid_mul(g.t, u.t, s.t);
    auto a = put_f32(b, randn(rows * cols, 34), cols);
    b.add(a.t, u.t);
    auto y1 = put_f32(b, std::vector<float>(rows * cols), cols);
    auto y2 = put_f32(b, std::vector<float>(rows * cols), cols);
    auto y3 = put_f32(b, std::vector<float>(rows * cols), cols);
    b.unary(UnaryOp::SILU, g.t, y1.t);
    b.unary(UnaryOp::SIGMOID, g.t, y2.t);
    auto big = put_f32(b, randn(rows * cols, 35, 15.0f), cols);  // softplus's linear branch too
    b.unary(UnaryOp::SOFTPLUS, big.t, y3.t);
    auto bias = put_f32(b, randn(cols, 36), cols), scale = put_f32(b, randn(cols, 37), cols);
    auto sp = put_f32(b, std::vector<float>(rows * cols), cols);
    b.softplus_scale(g.t, bias.t, scale.t, sp.t);
    // strided copy: the odd 50-column halves of 100-column rows
    auto src = put_f32(b, randn(rows * 100, 38), 100);
    auto dst = put_f32(b, std::vector<float>(rows * 2 * 50), 50);
    Tensor half = src.t;
    half.data = static_cast<float*>(src.t.data) + 50;
    half.cols = 50;
    b.copy(half, dst.t.slice_rows(0, rows));
    return {get_f32(b, o.t), get_f32(b, s.t), get_f32(b, a.t), get_f32(b, y1.t), get_f32(b, y2.t),
            get_f32(b, y3.t), get_f32(b, sp.t), get_f32(b, dst.t)};
  }, 1e-10, "elementwise");
}

// copy_batch (one launch per 32 pairs) against one copy per pair, bit for bit: 40 pairs (two
// launches) of contiguous f32 rows (a 2 MB item, the recurrent state's size), 12-byte rows (the
// 4-byte path), strided halves of wider rows (the attention's q / gate split), 6-byte F16 rows
// (the byte path), an empty pair; a destination overlapping another pair is refused.
TEST(CudaOps, CopyBatchIsTheCopiesBits) {
  DF_REQUIRE_GPU();
  static cuda::CudaBackend on([] {  // CudaOptions::copy_batch is off by default
    cuda::CudaOptions o;
    o.copy_batch = true;
    return o;
  }());
  Backend& b = on;
  std::vector<Held> src, one, batch;
  std::vector<Backend::CopyPair> singles, pairs;
  for (int i = 0; i < 40; ++i) {
    const int kind = i % 5;
    const int64_t cols = kind == 0 ? 512 : kind == 1 ? 3 : kind == 2 ? 100 : kind == 3 ? 3 : 7;
    const int64_t rows = kind == 0 ? 1024 : kind == 4 ? 0 : 9 + i;
    const GgmlType t = kind == 3 ? GgmlType::F16 : GgmlType::F32;
    std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(rows, 1) * cols * 4));
    for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 131 + static_cast<size_t>(i) * 7 + 1);
    src.push_back(put(b, t, cols, std::max<int64_t>(rows, 1), bytes.data()));
    Tensor s = src.back().t.slice_rows(0, rows);
    int64_t dcols = cols;
    if (kind == 2) {  // the odd halves of 100-column rows (stride 400 bytes, 200 copied)
      s.data = static_cast<float*>(s.data) + 50;
      s.cols = dcols = 50;
    }
    const std::vector<uint8_t> poison(static_cast<size_t>(std::max<int64_t>(rows, 1) * dcols * 4), 0xA5);
    one.push_back(put(b, t, dcols, std::max<int64_t>(rows, 1), poison.data()));
    batch.push_back(put(b, t, dcols, std::max<int64_t>(rows, 1), poison.data()));
    singles.push_back({s, one.back().t.slice_rows(0, rows)});
    pairs.push_back({s, batch.back().t.slice_rows(0, rows)});
  }
  for (const auto& p : singles) b.copy(p.src, p.dst);
  b.copy_batch(pairs);
  for (size_t i = 0; i < one.size(); ++i) {
    std::vector<uint8_t> x(one[i].t.nbytes()), y(batch[i].t.nbytes());
    b.download(one[i].t, x.data(), x.size());
    b.download(batch[i].t, y.data(), y.size());
    EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size())) << "pair " << i;
  }
  // overlapping: pair 1 writes into pair 0's destination
  const std::vector<Backend::CopyPair> bad = {{src[1].t, batch[1].t}, {src[1].t.slice_rows(0, 2), batch[1].t.slice_rows(3, 2)}};
  EXPECT_THROW(b.copy_batch(bad), Error);
}

// CudaOptions::copy_kernels: copy by the copy_batch kernel (at most 1 MiB, source and
// destination apart) and upload by the parameter kernel (at most 1 KiB, whole words), against
// a backend with cudaMemcpy for both, byte for byte: uploads of 4 .. 1024 bytes and past the
// kernel's sizes (1028 bytes, 6 bytes: the memcpy path), into a word-aligned offset; copies of
// contiguous rows, strided halves, F16 rows of 6 bytes and 513 rows of 2 KiB (past 1 MiB: the
// memcpy path).
TEST(CudaOps, CopyKernelsAreTheMemcpyBytes) {
  DF_REQUIRE_GPU();
  static cuda::CudaBackend on([] {  // CudaOptions::copy_kernels is off by default
    cuda::CudaOptions o;
    o.copy_kernels = true;
    return o;
  }());
  static cuda::CudaBackend off{cuda::CudaOptions{}};
  std::mt19937 rng(77);
  auto bytes_of = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& c : v) c = static_cast<uint8_t>(rng());
    return v;
  };
  auto read = [](Backend& b, const Tensor& t) {
    std::vector<uint8_t> v(t.nbytes());
    b.download(t, v.data(), v.size());
    return v;
  };
  for (const size_t n : {size_t{4}, size_t{12}, size_t{100}, size_t{1020}, size_t{1024}, size_t{1028}, size_t{6}}) {
    const std::vector<uint8_t> data = bytes_of(n);
    const std::vector<uint8_t> poison(2048, 0x5A);
    std::vector<uint8_t> got[2];
    int k = 0;
    for (Backend* b : {static_cast<Backend*>(&on), static_cast<Backend*>(&off)}) {
      Held h = put(*b, GgmlType::I8, 2048, 1, poison.data());
      Tensor dst = h.t;
      dst.data = static_cast<uint8_t*>(dst.data) + 8;  // a word-aligned offset
      dst.cols = static_cast<int64_t>(n);
      b->upload(dst, data.data(), n);
      got[k++] = read(*b, h.t);
    }
    EXPECT_EQ(got[0], got[1]) << "upload of " << n << " bytes";
    EXPECT_EQ(0, std::memcmp(got[0].data() + 8, data.data(), n)) << "upload of " << n << " bytes";
  }
  struct Case {
    GgmlType t;
    int64_t cols, rows, src_cols;  // src_cols > cols: the first `cols` of wider source rows
  };
  for (const Case c : {Case{GgmlType::F32, 384, 4, 384}, Case{GgmlType::F32, 50, 9, 100}, Case{GgmlType::F16, 3, 17, 3},
                       Case{GgmlType::F32, 512, 513, 512}}) {
    const std::vector<uint8_t> data = bytes_of(static_cast<size_t>(c.src_cols * c.rows) * (c.t == GgmlType::F16 ? 2 : 4));
    std::vector<uint8_t> got[2];
    int k = 0;
    for (Backend* b : {static_cast<Backend*>(&on), static_cast<Backend*>(&off)}) {
      Held s = put(*b, c.t, c.src_cols, c.rows, data.data());
      const std::vector<uint8_t> poison(static_cast<size_t>(c.cols * c.rows) * 4, 0xA5);
      Held d = put(*b, c.t, c.cols, c.rows, poison.data());
      Tensor src = s.t;
      src.cols = c.cols;
      b->copy(src, d.t);
      got[k++] = read(*b, d.t);
    }
    EXPECT_EQ(got[0], got[1]) << "copy of " << c.rows << " x " << c.cols;
  }
}

TEST(CudaOps, L2NormStridedView) {
  DF_REQUIRE_GPU();
  compare([&](Backend& b) -> Outputs {
    auto x = put_f32(b, randn(6 * 3 * 128, 41), 3 * 128);
    const Tensor k = x.t.slice_cols(128, 256);  // columns [128, 384): two groups of 128
    b.l2_norm(k, 128, 1e-6f, k);
    return {get_f32(b, x.t)};
  }, 1e-10, "l2_norm");
}

TEST(CudaOps, SsmConvWithState) {
  DF_REQUIRE_GPU();
  for (int64_t n : {1, 6}) {
    for (int64_t K : {4, 3}) {
      const int64_t C = 200;
      compare([&](Backend& b) -> Outputs {
        auto x = put_f32(b, randn(n * (C + 8), 51), C + 8);  // strided view: C of C+8 columns
        auto st = put_f32(b, randn((K - 1) * C, 52), C);
        auto w = put_f32(b, randn(C * K, 53), K);
        auto y = put_f32(b, std::vector<float>(n * C), C);
        auto snap = put_f32(b, std::vector<float>(4 * (K - 1) * C, NAN), C);  // 4 slots
        b.ssm_conv(x.t.slice_cols(8, C), st.t, w.t, y.t, Tensor{});
        b.ssm_conv(x.t.slice_cols(8, C), st.t, w.t, y.t, snap.t);  // again: the carried state
        auto s = get_f32(b, snap.t);
        s.resize(static_cast<size_t>(std::min<int64_t>(n, 4) * (K - 1) * C));  // slots written
        return {get_f32(b, y.t), get_f32(b, st.t), s};
      }, 1e-10, "ssm_conv n=" + std::to_string(n) + " K=" + std::to_string(K));
    }
  }
}

TEST(CudaOps, GatedDeltaRule) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; };
  for (const Case& c : {Case{64, 2, 4, 1}, Case{64, 6, 6, 7}, Case{128, 2, 6, 3}, Case{128, 1, 2, 1}}) {
    compare([&](Backend& b) -> Outputs {
      const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
      auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 61), 2 * kd + vd);
      const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
      b.l2_norm(q, c.d, 1e-6f, q);
      b.l2_norm(k, c.d, 1e-6f, k);
      auto gate = put_f32(b, randn(c.n * c.Hv, 62), c.Hv);
      b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 63), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                       gate.t);
      auto beta = put_f32(b, randn(c.n * c.Hv, 64), c.Hv);
      b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
      auto st = put_f32(b, randn(c.Hv * c.d * c.d, 65, 0.1f), c.d);
      auto out = put_f32(b, std::vector<float>(c.n * vd), vd);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      auto snap = put_f32(b, std::vector<float>(3 * vd * c.d, NAN), c.d);  // 3 slots
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, Tensor{});
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, snap.t);
      auto s = get_f32(b, snap.t);
      s.resize(static_cast<size_t>(std::min<int64_t>(c.n, 3) * vd * c.d));
      return {get_f32(b, out.t), get_f32(b, st.t), s};
    }, 1e-9, "gated_delta_rule d=" + std::to_string(c.d) + " n=" + std::to_string(c.n));
  }
}

// Prefill lengths through the backend (one chunk of 64, several, ending mid-chunk; with
// snapshots), the output of every row and the state left.
TEST(CudaOps, GatedDeltaRuleLong) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; bool snap; };
  for (const Case& c : {Case{128, 2, 6, 150, false}, Case{64, 3, 6, 64, false}, Case{32, 1, 2, 17, false},
                        Case{128, 1, 2, 200, false}, Case{64, 2, 4, 40, true}}) {
    compare([&](Backend& b) -> Outputs {
      const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
      auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 71), 2 * kd + vd);
      const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
      b.l2_norm(q, c.d, 1e-6f, q);
      b.l2_norm(k, c.d, 1e-6f, k);
      auto gate = put_f32(b, randn(c.n * c.Hv, 72), c.Hv);
      b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 73), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                       gate.t);
      auto beta = put_f32(b, randn(c.n * c.Hv, 74), c.Hv);
      b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
      auto st = put_f32(b, randn(c.Hv * c.d * c.d, 75, 0.1f), c.d);
      auto out = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      auto snap = put_f32(b, std::vector<float>(3 * vd * c.d, NAN), c.d);  // 3 slots
      b.gated_delta_rule(q, k, v, gate.t, beta.t, st.t, scale, out.t, c.snap ? snap.t : Tensor{});
      Outputs o = {get_f32(b, out.t), get_f32(b, st.t)};
      if (c.snap) o.push_back(get_f32(b, snap.t));
      return o;
    }, 1e-9, "gated_delta_rule d=" + std::to_string(c.d) + " n=" + std::to_string(c.n) + (c.snap ? " snapshots" : ""));
  }
}

// The chunk-parallel kernel (not dispatched: slower than the token kernel on the H200, see
// cuda_backend.cu) against the token kernel on the same inputs: one chunk, several, ending
// mid-chunk, head sizes 32..128; then every lanes-per-row variant of the token kernel against
// the chunked one. Budget 1e-8: the same f32 terms summed in another order.
TEST(CudaOps, GatedDeltaRuleChunkedKernel) {
  DF_REQUIRE_GPU();
  struct Case { int64_t d, Hk, Hv, n; };
  for (const Case& c : {Case{128, 2, 6, 150}, Case{64, 3, 6, 64}, Case{32, 1, 2, 17}, Case{128, 1, 2, 200}}) {
    Backend& b = *gpu();
    const int64_t kd = c.Hk * c.d, vd = c.Hv * c.d;
    auto qkv = put_f32(b, randn(c.n * (2 * kd + vd), 81), 2 * kd + vd);
    const Tensor q = qkv.t.slice_cols(0, kd), k = qkv.t.slice_cols(kd, kd), v = qkv.t.slice_cols(2 * kd, vd);
    b.l2_norm(q, c.d, 1e-6f, q);
    b.l2_norm(k, c.d, 1e-6f, k);
    auto gate = put_f32(b, randn(c.n * c.Hv, 82), c.Hv);
    b.softplus_scale(gate.t, put_f32(b, randn(c.Hv, 83), c.Hv).t, put_f32(b, std::vector<float>(c.Hv, -0.5f), c.Hv).t,
                     gate.t);
    auto beta = put_f32(b, randn(c.n * c.Hv, 84), c.Hv);
    b.unary(UnaryOp::SIGMOID, beta.t, beta.t);
    const auto st0 = randn(c.Hv * c.d * c.d, 85, 0.1f);
    auto st1 = put_f32(b, st0, c.d), st2 = put_f32(b, st0, c.d);
    auto out1 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd), out2 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
    b.synchronize();
    cuda::DeltaRuleArgs a;
    a.q = static_cast<float*>(q.data), a.q_stride = 2 * kd + vd;
    a.k = static_cast<float*>(k.data), a.k_stride = 2 * kd + vd;
    a.v = static_cast<float*>(v.data), a.v_stride = 2 * kd + vd;
    a.g = static_cast<float*>(gate.t.data), a.g_stride = c.Hv;
    a.beta = static_cast<float*>(beta.t.data), a.beta_stride = c.Hv;
    a.out_stride = vd, a.n = c.n, a.d = static_cast<int32_t>(c.d);
    a.n_k_heads = static_cast<int32_t>(c.Hk), a.n_v_heads = static_cast<int32_t>(c.Hv);
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    cuda::DeltaRuleArgs a1 = a, a2 = a;
    a1.state = static_cast<float*>(st1.t.data), a1.out = static_cast<float*>(out1.t.data);
    a2.state = static_cast<float*>(st2.t.data), a2.out = static_cast<float*>(out2.t.data);
    cuda::launch_gated_delta_rule_chunked(a1, nullptr);
    cuda::launch_gated_delta_rule(a2, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::string what = "chunked d=" + std::to_string(c.d) + " n=" + std::to_string(c.n);
    EXPECT_LE(nerr(get_f32(b, out2.t), get_f32(b, out1.t)), 1e-8) << what << ": outputs";
    EXPECT_LE(nerr(get_f32(b, st2.t), get_f32(b, st1.t)), 1e-8) << what << ": state";
    for (int lanes : {32, 16, 8, 4}) {  // every lanes-per-row variant of the token kernel
      auto st3 = put_f32(b, st0, c.d);
      auto out3 = put_f32(b, std::vector<float>(c.n * vd, NAN), vd);
      b.synchronize();
      cuda::DeltaRuleArgs a3 = a;
      a3.state = static_cast<float*>(st3.t.data), a3.out = static_cast<float*>(out3.t.data);
      if (!cuda::launch_gated_delta_rule_lanes(a3, lanes, nullptr)) continue;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::string w3 = what + " token kernel, " + std::to_string(lanes) + " lanes a row";
      EXPECT_LE(nerr(get_f32(b, out3.t), get_f32(b, out1.t)), 1e-8) << w3 << ": outputs";
      EXPECT_LE(nerr(get_f32(b, st3.t), get_f32(b, st1.t)), 1e-8) << w3 << ": state";
    }
  }
}

TEST(CudaOps, ArgmaxLowestIndexWins) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int64_t V = 248320, rows = 3;
  auto x = randn(static_cast<size_t>(V * rows), 71);
  x[5000] = 100.0f, x[7000] = 100.0f;                     // row 0: a tie, 5000 wins
  x[V + V - 1] = 50.0f;                                   // row 1: the last column
  auto t = put_f32(g, x, V);
  std::vector<int32_t> init(rows, -1);
  auto out = put(g, GgmlType::I32, 1, rows, init.data());
  g.argmax(t.t, out.t);
  std::vector<int32_t> got(rows);
  g.download(out.t, got.data(), got.size() * sizeof(int32_t));
  EXPECT_EQ(got[0], 5000);
  EXPECT_EQ(got[1], V - 1);
  EXPECT_EQ(got[2], static_cast<int32_t>(std::max_element(x.begin() + 2 * V, x.end()) - (x.begin() + 2 * V)));
}

// The lean small kernels (CudaOptions::lean_kernels: PDL launches, attention's merge in the
// slices' last block, argmax over many blocks) give the bits of the plain ones (no PDL, the
// merge kernel, one argmax block), call after call (the tickets reset themselves).
TEST(CudaOps, LeanSmallKernelsAreThePlainBits) {
  DF_REQUIRE_GPU();
  cuda::CudaOptions o;
  o.lean_kernels = false;
  o.pdl = false;
  cuda::CudaBackend plain(o);
  struct Case {
    int32_t n_head, n_kv, hd;
    int64_t n_ctx, filled, n;
  };
  for (const Case& c : {Case{8, 8, 128, 4096, 3000, 1}, Case{6, 2, 64, 1024, 700, 8}, Case{4, 1, 256, 600, 37, 5},
                        Case{32, 8, 128, 4096, 257, 1}, Case{16, 4, 128, 8192, 8000, 3}}) {
    auto run = [&](Backend& b) {
      const int64_t kv = static_cast<int64_t>(c.n_kv) * c.hd, qd = static_cast<int64_t>(c.n_head) * c.hd;
      KvCache kc = b.alloc_kv_cache(c.n_ctx, kv, GgmlType::F16);
      auto k = put_f32(b, randn(static_cast<size_t>(c.filled * kv), 31), kv);
      auto v = put_f32(b, randn(static_cast<size_t>(c.filled * kv), 32), kv);
      b.kv_store(kc, k.t, v.t, positions(b, 0, c.filled).t);
      auto q = put_f32(b, randn(static_cast<size_t>(c.n * qd), 33, 2.0f), qd);
      auto out = put_f32(b, std::vector<float>(c.n * qd, NAN), qd);
      AttentionParams p{c.n_head, c.n_kv, c.hd, 1.0f / std::sqrt(static_cast<float>(c.hd))};
      std::vector<float> all;
      for (int64_t at : {c.filled - c.n, c.filled - c.n - 1, int64_t{0}}) {  // three calls, the tickets reused
        if (at < 0) continue;
        b.attention(q.t, kc, positions(b, at, c.n).t, p, out.t);
        const auto got = get_f32(b, out.t);
        all.insert(all.end(), got.begin(), got.end());
      }
      return all;
    };
    const auto lean = run(*gpu()), ref = run(plain);
    ASSERT_EQ(lean.size(), ref.size());
    EXPECT_EQ(0, std::memcmp(lean.data(), ref.data(), lean.size() * sizeof(float)))
        << "attention heads " << c.n_head << " hd " << c.hd << " ctx " << c.n_ctx << " filled " << c.filled
        << " rows " << c.n;
  }
  const int64_t V = 151936, rows = 5;
  auto x = randn(static_cast<size_t>(V * rows), 72);
  x[9000] = 80.0f, x[100000] = 80.0f;  // row 0: a tie across blocks: 9000 wins
  x[V + 150000] = 60.0f;               // row 1: in the last block
  x[2 * V] = 70.0f;                    // row 2: the first column
  for (Backend* b : {static_cast<Backend*>(gpu()), static_cast<Backend*>(&plain)}) {
    auto t = put_f32(*b, x, V);
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<int32_t> init(rows, -1);
      auto out = put(*b, GgmlType::I32, 1, rows, init.data());
      b->argmax(t.t, out.t);
      std::vector<int32_t> got(rows);
      b->download(out.t, got.data(), got.size() * sizeof(int32_t));
      EXPECT_EQ(got[0], 9000);
      EXPECT_EQ(got[1], 150000);
      EXPECT_EQ(got[2], 0);
      for (int64_t r = 3; r < rows; ++r)
        EXPECT_EQ(got[r], static_cast<int32_t>(std::max_element(x.begin() + r * V, x.begin() + (r + 1) * V) -
                                               (x.begin() + r * V)));
    }
  }
}

// A recorded decode attention (its slice partials in the context's scratch) replayed after a
// larger op grew the scratch (a long prompt's GEMM after the decode graphs of a short one: a
// chat's second turn, a server's next request) gives the bits it gave when recorded: the
// outgrown buffer stays allocated for the graphs that hold its address (CudaContext::scratch).
TEST(CudaOps, GraphReplayAfterScratchGrows) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend g{cuda::CudaOptions{}};
  const int32_t H = 8, Hk = 2, hd = 128;
  const int64_t kv = Hk * hd, qd = H * hd, n_ctx = 4096, filled = 1500;
  AttentionParams p{H, Hk, hd, 1.0f / std::sqrt(static_cast<float>(hd))};
  KvCache c = g.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
  auto k = put_f32(g, randn(static_cast<size_t>(filled * kv), 71), kv);
  auto v = put_f32(g, randn(static_cast<size_t>(filled * kv), 72), kv);
  g.kv_store(c, k.t, v.t, positions(g, 0, filled).t);
  auto q = put_f32(g, randn(static_cast<size_t>(qd), 73, 2.0f), qd);
  auto out = put_f32(g, std::vector<float>(qd, NAN), qd);
  auto pos = positions(g, filled - 1, 1);  // 24 slices of 64: partials, then the last slice's merge
  const std::unique_ptr<OpGraph> graph = g.record([&] { g.attention(q.t, c, pos.t, p, out.t); });
  ASSERT_TRUE(graph);
  const auto recorded = get_f32(g, out.t);
  // A GEMM of 4000 x 4096 rounds x to f16 in 32.8 MB of scratch: more than the 20 MB it starts with.
  const int64_t wk = 4096, wm = 64, wn = 4000;
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q8_0, wk) * wm);
  const auto wf = randn(static_cast<size_t>(wk * wm), 74);
  for (int64_t r = 0; r < wm; ++r)
    cpu::quantize_row_ref(GgmlType::Q8_0, wf.data() + r * wk, wq.data() + row_bytes(GgmlType::Q8_0, wk) * r, wk);
  const Tensor W = g.weight(GgmlType::Q8_0, wk, wm, wq.data());
  auto x = put_f32(g, randn(static_cast<size_t>(wn * wk), 75), wk);
  auto y = put_f32(g, std::vector<float>(static_cast<size_t>(wn * wm), NAN), wm);
  g.matmul(W, x.t, y.t);
  for (float f : get_f32(g, y.t)) ASSERT_TRUE(std::isfinite(f));
  g.upload(out.t, std::vector<float>(qd, NAN).data(), out.t.nbytes());
  g.replay(*graph);
  const auto replayed = get_f32(g, out.t);
  for (float f : replayed) ASSERT_TRUE(std::isfinite(f));
  EXPECT_EQ(0, std::memcmp(recorded.data(), replayed.data(), recorded.size() * 4));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// A decode-like sequence captured once and replayed at new positions gives what running
// the ops eagerly gives.
TEST(CudaOps, GraphReplayAtNewPositions) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int32_t H = 4, Hk = 2, hd = 64;
  const int64_t kv = Hk * hd, qd = H * hd, n_ctx = 2048;
  AttentionParams p{H, Hk, hd, 0.125f};
  RopeParams rq, rk;
  rq.n_head = H, rq.head_dim = hd, rq.n_rot = hd;
  rk = rq;
  rk.n_head = Hk;
  auto run = [&](bool graph) {
    KvCache c = g.alloc_kv_cache(n_ctx, kv, GgmlType::F16);
    auto q = put_f32(g, std::vector<float>(qd), qd);
    auto k = put_f32(g, std::vector<float>(kv), kv);
    auto v = put_f32(g, std::vector<float>(kv), kv);
    auto out = put_f32(g, std::vector<float>(qd), qd);
    auto pos = positions(g, 0, 1);
    auto step = [&] {
      g.rope(q.t, pos.t, rq);
      g.rope(k.t, pos.t, rk);
      g.kv_store(c, k.t, v.t, pos.t);
      g.attention(q.t, c, pos.t, p, out.t);
    };
    std::unique_ptr<OpGraph> graph_exec;
    std::vector<float> all;
    for (int32_t t = 0; t < 600; ++t) {
      const auto qv = randn(qd, 100 + t), kvv = randn(kv, 2000 + t), vv = randn(kv, 4000 + t);
      g.upload(q.t, qv.data(), q.t.nbytes());
      g.upload(k.t, kvv.data(), k.t.nbytes());
      g.upload(v.t, vv.data(), v.t.nbytes());
      g.upload(pos.t, &t, sizeof t);
      if (!graph) {
        step();
      } else if (!graph_exec) {
        graph_exec = g.record(step);  // records and runs this step
        EXPECT_TRUE(graph_exec);
      } else {
        g.replay(*graph_exec);
      }
      if (t % 97 == 0 || t == 599) {
        const auto o = get_f32(g, out.t);
        all.insert(all.end(), o.begin(), o.end());
      }
    }
    return all;
  };
  const auto eager = run(false), replayed = run(true);
  EXPECT_EQ(eager, replayed);
}

// Decode and verify ops give row r the same bits whether the call has 1 row or up to 8.
TEST(CudaOps, RowCountIndependence) {
  DF_REQUIRE_GPU();
  cuda::CudaBackend& g = *gpu();
  const int64_t k = 512, m = 300, kvd = 2 * 128, qd = 8 * 128, n_ctx = 20000;
  std::vector<uint8_t> wq(row_bytes(GgmlType::Q4_K, k) * m);
  const auto wf = randn(static_cast<size_t>(k * m), 81);
  for (int64_t r = 0; r < m; ++r)
    cpu::quantize_row_ref(GgmlType::Q4_K, wf.data() + r * k, wq.data() + row_bytes(GgmlType::Q4_K, k) * r, k);
  const Tensor W = g.weight(GgmlType::Q4_K, k, m, wq.data());
  auto x = put_f32(g, randn(8 * k, 82), k);
  auto y8 = put_f32(g, std::vector<float>(8 * m), m), y1 = put_f32(g, std::vector<float>(m), m);
  g.matmul(W, x.t, y8.t);
  KvCache c = g.alloc_kv_cache(n_ctx, kvd, GgmlType::F16);
  auto kk = put_f32(g, randn(static_cast<size_t>(12000 * kvd), 83), kvd);
  auto vv = put_f32(g, randn(static_cast<size_t>(12000 * kvd), 84), kvd);
  g.kv_store(c, kk.t, vv.t, positions(g, 0, 12000).t);
  auto q = put_f32(g, randn(8 * qd, 85), qd);
  auto o8 = put_f32(g, std::vector<float>(8 * qd), qd), o1 = put_f32(g, std::vector<float>(qd), qd);
  AttentionParams p{8, 2, 128, 0.088f};
  g.attention(q.t, c, positions(g, 11992, 8).t, p, o8.t);
  const auto Y8 = get_f32(g, y8.t), O8 = get_f32(g, o8.t);
  for (int64_t r = 0; r < 8; ++r) {
    g.matmul(W, x.t.slice_rows(r, 1), y1.t);
    g.attention(q.t.slice_rows(r, 1), c, positions(g, 11992 + r, 1).t, p, o1.t);
    const auto Y1 = get_f32(g, y1.t), O1 = get_f32(g, o1.t);
    EXPECT_TRUE(std::equal(Y1.begin(), Y1.end(), Y8.begin() + r * m)) << "matmul row " << r;
    EXPECT_TRUE(std::equal(O1.begin(), O1.end(), O8.begin() + r * qd)) << "attention row " << r;
  }
}

}  // namespace
}  // namespace df::cudatest
