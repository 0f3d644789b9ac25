// The GPU matvec and get_rows of every weight format against the CPU reference
// (src/quant dequantize_ref, f64 dot): NMSE <= 1e-9 for every n in 1..8 (f32 accumulation of
// exactly dequantized weights lands near 1e-13), rows bit-identical whatever n is, every
// output written, get_rows bit-exact. The formats with int8-x kernels (Context::int8_x, the
// default) are checked in both modes: with x rounded to int8 per 32 the budget is 1e-4
// (the rounding of Gaussian x costs ~1e-5); their pipelined kernels against the unpipelined
// loop, bit for bit. Skipped with a message when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/matvec/matvec.cuh"
#include "common/error.h"
#include "matvec_testing.h"

namespace df::cudamv {
namespace {

constexpr double kNmseBudget = 1e-9;
constexpr double kNmseBudgetInt8X = 1e-4;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define DF_SKIP_WITHOUT_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA matvec tests need a GPU"

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

class MatvecCuda : public ::testing::TestWithParam<GgmlType> {};


// The pipe tests' formats: the planar int8-x ones (family_dp4a.cu), and of the raw-block ones
// (family_i8.cuh: no pipelined configuration, so these check the loop and its short pipe)
// parts of 16 elements (NVFP4), of 4, 12 and 20 bytes (Q1_0, IQ2_XXS, IQ3_S) and of 80 (Q3_K).
constexpr GgmlType kPipeTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0,  GgmlType::Q5_0,    GgmlType::Q5_1,  GgmlType::Q4_K,
                                   GgmlType::Q5_K, GgmlType::Q6_K,  GgmlType::IQ4_XS,  GgmlType::NVFP4, GgmlType::Q1_0,
                                   GgmlType::IQ2_XXS, GgmlType::IQ3_S, GgmlType::Q3_K};

void check_type(GgmlType t, int64_t rows, int64_t cols, uint64_t seed, bool int8_x) {
  SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols) +
               (int8_x ? " int8 x" : " f32 x"));
  Context ctx(int8_x);
  const auto blocks = testing::random_blocks(t, cols, rows, seed);
  const auto w = testing::dequant_rows(t, blocks.data(), cols, rows);
  const auto x = testing::random_x(kMaxRows * cols, seed + 1);
  const auto ref = testing::reference(w, x, cols, rows, kMaxRows);
  PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
  ASSERT_EQ(W.bytes, packed_bytes(t, cols, rows));
  ASSERT_EQ(W.int8_x, int8_x && int8_x_supported(t, cols));
  const double budget = W.int8_x ? kNmseBudgetInt8X : kNmseBudget;

  DeviceBuffer<float> dx(x.size()), dy(kMaxRows * rows), dy1(rows);
  ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<std::vector<float>> ys(kMaxRows + 1);
  for (int n = 1; n <= kMaxRows; ++n) {
    ASSERT_EQ(cudaMemset(dy.p, 0xff, kMaxRows * rows * 4), cudaSuccess);  // NaN poison
    matvec(W, dx.p, dy.p, n, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ys[n].resize(static_cast<size_t>(n * rows));
    ASSERT_EQ(cudaMemcpy(ys[n].data(), dy.p, ys[n].size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    const double e = testing::nmse(ys[n].data(), ref.data(), ys[n].size());
    EXPECT_LE(e, budget) << "n = " << n;
  }
  // Each row of x gives the same bits alone, and in every batch.
  for (int j = 0; j < kMaxRows; ++j) {
    matvec(W, dx.p + j * cols, dy1.p, 1, nullptr);
    std::vector<float> y1(static_cast<size_t>(rows));
    ASSERT_EQ(cudaMemcpy(y1.data(), dy1.p, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int n = j + 1; n <= kMaxRows; ++n)
      ASSERT_EQ(std::memcmp(y1.data(), ys[n].data() + j * rows, rows * 4), 0) << "x row " << j << " in a batch of " << n;
  }
  // get_rows: bit-exact with the reference dequantization; an id out of range reads NaN.
  const std::vector<int32_t> ids = {static_cast<int32_t>(rows - 1), 0, 3, 3, static_cast<int32_t>(rows / 2), -1,
                                    static_cast<int32_t>(rows)};
  DeviceBuffer<int32_t> did(ids.size());
  DeviceBuffer<float> dout(ids.size() * cols);
  ASSERT_EQ(cudaMemcpy(did.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  get_rows(W, did.p, static_cast<int>(ids.size()), dout.p, nullptr);
  std::vector<float> out(ids.size() * cols);
  ASSERT_EQ(cudaMemcpy(out.data(), dout.p, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= rows) {
      for (int64_t c = 0; c < cols; ++c) ASSERT_TRUE(std::isnan(out[k * cols + c])) << "id " << ids[k];
    } else {
      ASSERT_EQ(std::memcmp(out.data() + k * cols, w.data() + ids[k] * cols, cols * 4), 0) << "id " << ids[k];
    }
  }
}

TEST_P(MatvecCuda, MatchesCpuReference) {
  DF_SKIP_WITHOUT_GPU();
  for (bool int8_x : {false, true}) {
    if (int8_x && !int8_x_supported(GetParam(), 768)) continue;
    check_type(GetParam(), 67, 768, 11, int8_x);   // rows not a multiple of any rows-per-block
    check_type(GetParam(), 5, 2560, 12, int8_x);   // few rows, a real model width
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, MatvecCuda, ::testing::ValuesIn(testing::all_weight_types()),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// The pipelined int8-x kernels (Context::pipe, the default: the next steps' loads in flight
// while a step is computed) give the bits of the unpipelined loop, for plain launches over
// shapes of one to several row groups per block and rows split over warps, and for the
// fused launches (norm prologue + three matrices with epilogues, the SwiGLU pair).
TEST(MatvecCudaPipe, PipelinedGivesTheUnpipelinedBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true);
  auto run = [&](PackedWeight& W, const float* x, float* y, int64_t ny, bool pipe, const MatvecFusion* fu,
                 PackedWeight* more0, PackedWeight* more1) {
    W.pipe = pipe;
    if (more0) more0->pipe = pipe;
    if (more1) more1->pipe = pipe;
    EXPECT_EQ(cudaMemset(y, 0xff, ny * 4), cudaSuccess);
    if (fu) EXPECT_TRUE(matvec_fused(W, x, y, 1, *fu, nullptr));
    else matvec(W, x, y, 1, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> h(static_cast<size_t>(ny));
    EXPECT_EQ(cudaMemcpy(h.data(), y, ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  auto all_finite = [](const std::vector<float>& v) {
    for (float f : v)
      if (!std::isfinite(f)) return false;
    return true;
  };
  for (GgmlType t : kPipeTypes) {
    const int64_t shapes[][2] = {{67, 768}, {5, 2560}, {9000, 512}, {300, 8192}, {4500, 2560}};
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1];
      SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const auto blocks = testing::random_blocks(t, cols, rows, 40 + rows);
      PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
      ASSERT_TRUE(W.int8_x);
      const auto x = testing::random_x(cols, 41 + rows);
      DeviceBuffer<float> dx(x.size()), dy(rows);
      ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      const auto a = run(W, dx.p, dy.p, rows, false, nullptr, nullptr, nullptr);
      const auto b = run(W, dx.p, dy.p, rows, true, nullptr, nullptr, nullptr);
      ASSERT_TRUE(all_finite(a));
      ASSERT_EQ(std::memcmp(a.data(), b.data(), rows * 4), 0);
    }
    // Fused: norm + Q|K|V-like matrices (store, accumulate, sigmoid) and the SwiGLU pair.
    const int64_t cols = 2560, r0 = 1024, r1 = 256, r2 = 96;
    SCOPED_TRACE(std::string(type_name(t)) + " fused");
    const auto b0 = testing::random_blocks(t, cols, r0, 50), b1 = testing::random_blocks(t, cols, r1, 51),
               b2 = testing::random_blocks(t, cols, r2, 52), b3 = testing::random_blocks(t, cols, r0, 53);
    PackedWeight W0 = pack_weight(ctx, t, cols, r0, b0.data()), W1 = pack_weight(ctx, t, cols, r1, b1.data()),
                 W2 = pack_weight(ctx, t, cols, r2, b2.data()), W3 = pack_weight(ctx, t, cols, r0, b3.data());
    const auto x = testing::random_x(cols, 54), nw = testing::random_x(cols, 55);
    DeviceBuffer<float> dx(cols), dn(cols), dy(r0 + r1 + r2);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dn.p, nw.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
    MatvecFusion fu;
    fu.more[0] = &W1, fu.more[1] = &W2;
    fu.y_more[0] = dy.p + r0, fu.y_more[1] = dy.p + r0 + r1;
    fu.epi[0] = 0, fu.epi[1] = 2, fu.epi[2] = 2;
    fu.norm_w = dn.p, fu.eps = 1e-6f;
    const auto a = run(W0, dx.p, dy.p, r0 + r1 + r2, false, &fu, &W1, &W2);
    const auto b = run(W0, dx.p, dy.p, r0 + r1 + r2, true, &fu, &W1, &W2);
    ASSERT_TRUE(all_finite(a));
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    MatvecFusion sw;
    sw.more[0] = &W3, sw.swiglu = true, sw.norm_w = dn.p, sw.eps = 1e-6f;
    const auto c = run(W0, dx.p, dy.p, r0, false, &sw, &W3, nullptr);
    const auto d = run(W0, dx.p, dy.p, r0, true, &sw, &W3, nullptr);
    ASSERT_TRUE(all_finite(c));
    ASSERT_EQ(std::memcmp(c.data(), d.data(), c.size() * 4), 0);
  }
}

// The int8-x kernels of 2..8 rows (a speculative verify) with their loads pipelined
// (Context::pipe_rows, the default): row j of an n-row launch has the bits of x row j alone
// (n = 1, the pipelined kernel) and of the n-row launch of the unpipelined loop, for plain
// launches over shapes of one to several row groups per block and rows split over warps, and
// for the fused launches (norm prologue + three matrices with epilogues, the SwiGLU pair).
TEST(MatvecCudaPipe, RowsOfEveryCountGiveTheRowAloneBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true, true);
  struct Launch {
    PackedWeight* W[3];
    int64_t rows[3];
    int nmat;
    const MatvecFusion* fu;
  };
  // y of matrix i at n rows: [n, rows[i]] (the SwiGLU pair: matrix 0 only).
  auto run = [&](const Launch& L, const float* x, int n, bool rows_pipe) {
    for (int i = 0; i < 3; ++i)
      if (L.W[i]) L.W[i]->pipe = true, L.W[i]->pipe_rows = rows_pipe;
    const int outs = L.fu && L.fu->swiglu ? 1 : L.nmat;
    std::vector<DeviceBuffer<float>*> ys;
    for (int i = 0; i < outs; ++i) ys.push_back(new DeviceBuffer<float>(static_cast<size_t>(n * L.rows[i])));
    for (int i = 0; i < outs; ++i) EXPECT_EQ(cudaMemset(ys[i]->p, 0xff, n * L.rows[i] * 4), cudaSuccess);
    bool launched = true;
    if (L.fu) {
      MatvecFusion f = *L.fu;
      for (int i = 1; i < outs; ++i) f.y_more[i - 1] = ys[i]->p;
      launched = matvec_fused(*L.W[0], x, ys[0]->p, n, f, nullptr);
    } else {
      matvec(*L.W[0], x, ys[0]->p, n, nullptr);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<std::vector<float>> h(static_cast<size_t>(launched ? outs : 0));
    for (int i = 0; i < outs; ++i) {
      if (!launched) {
        delete ys[i];
        continue;
      }
      h[i].resize(static_cast<size_t>(n * L.rows[i]));
      EXPECT_EQ(cudaMemcpy(h[i].data(), ys[i]->p, h[i].size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      delete ys[i];
    }
    return h;
  };
  auto check = [&](const Launch& L, int64_t cols, uint64_t seed, GgmlType t) {
    const auto x = testing::random_x(kMaxRows * cols, seed);
    DeviceBuffer<float> dx(x.size());
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<std::vector<std::vector<float>>> alone;  // [x row][output]
    for (int j = 0; j < kMaxRows; ++j) {
      alone.push_back(run(L, dx.p + j * cols, 1, true));
      ASSERT_FALSE(alone.back().empty()) << "n = 1 did not launch";
    }
    for (const auto& o : alone[0])
      for (float v : o) ASSERT_TRUE(std::isfinite(v));
    for (int n = 2; n <= kMaxRows; ++n)
      for (bool rows_pipe : {true, false}) {
        const auto got = run(L, dx.p, n, rows_pipe);
        // Not in one launch: the SwiGLU pair of the unpipelined loop above two rows (one row per
        // warp), and Q4_K's / Q5_K's above four (their registers; family_dp4a.cu Dp4aPipe). The
        // raw-block formats (family_i8.cuh) have no pipelined configuration: always the loop.
        const bool raw = L.W[0]->m_row_bytes == 0;  // raw blocks: no meta plane
        const bool may_not_fuse = L.fu && L.fu->swiglu && n > 2 &&
                                  (!rows_pipe || raw || ((t == GgmlType::Q4_K || t == GgmlType::Q5_K) && n > 4));
        if (got.empty()) {
          ASSERT_TRUE(may_not_fuse) << "n = " << n << ": the fused launch did not run";
          continue;
        }        for (size_t i = 0; i < got.size(); ++i) {
          const size_t w = static_cast<size_t>(L.rows[i]);
          for (int j = 0; j < n; ++j)
            ASSERT_EQ(std::memcmp(got[i].data() + j * w, alone[j][i].data(), w * 4), 0)
                << "n = " << n << (rows_pipe ? " pipelined" : " unpipelined") << ", x row " << j << ", output " << i;
        }
      }
  };
  for (GgmlType t : kPipeTypes) {
    const int64_t shapes[][2] = {{67, 768}, {9000, 512}, {300, 8192}, {4500, 2560}};
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1];
      SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      const auto blocks = testing::random_blocks(t, cols, rows, 60 + rows);
      PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
      ASSERT_TRUE(W.int8_x);
      check(Launch{{&W, nullptr, nullptr}, {rows, 0, 0}, 1, nullptr}, cols, 61 + rows, t);
    }
    const int64_t cols = 2560, r0 = 1024, r1 = 256, r2 = 96;
    SCOPED_TRACE(std::string(type_name(t)) + " fused");
    const auto b0 = testing::random_blocks(t, cols, r0, 70), b1 = testing::random_blocks(t, cols, r1, 71),
               b2 = testing::random_blocks(t, cols, r2, 72), b3 = testing::random_blocks(t, cols, r0, 73);
    PackedWeight W0 = pack_weight(ctx, t, cols, r0, b0.data()), W1 = pack_weight(ctx, t, cols, r1, b1.data()),
                 W2 = pack_weight(ctx, t, cols, r2, b2.data()), W3 = pack_weight(ctx, t, cols, r0, b3.data());
    const auto nw = testing::random_x(cols, 75);
    DeviceBuffer<float> dn(cols);
    ASSERT_EQ(cudaMemcpy(dn.p, nw.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
    MatvecFusion fu;  // norm + Q|K|V-like matrices (store, sigmoid, sigmoid)
    fu.more[0] = &W1, fu.more[1] = &W2;
    fu.epi[0] = 0, fu.epi[1] = 2, fu.epi[2] = 2;
    fu.norm_w = dn.p, fu.eps = 1e-6f;
    check(Launch{{&W0, &W1, &W2}, {r0, r1, r2}, 3, &fu}, cols, 74, t);
    MatvecFusion sw;  // the SwiGLU pair with the norm prologue (two rows per warp)
    sw.more[0] = &W3, sw.swiglu = true, sw.norm_w = dn.p, sw.eps = 1e-6f;
    check(Launch{{&W0, &W3, nullptr}, {r0, r0, 0}, 2, &sw}, cols, 76, t);
  }
}

// The L2 prefetch (PackedWeight::l2_prefetch, blocks_per_sm: MvFuse::l2_bytes) only moves
// weight bytes into L2 and shrinks the grid: every row's bits must equal those without it, for
// the int8-x kernels (pipelined and not), f32-x planar and raw formats, n = 1 and 3, plain
// and fused launches, a bound that covers all of the weight and one that covers a part.
TEST(MatvecCudaL2Prefetch, PrefetchGivesTheSameBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true);
  struct Cfg {
    int64_t bytes;
    int per_sm;
  };
  const Cfg cfgs[] = {{int64_t{1} << 30, 0}, {int64_t{1} << 16, 0}, {int64_t{1} << 30, 1}, {0, 1}};
  auto set = [](PackedWeight* w, const Cfg& c) {
    if (w) w->l2_prefetch = c.bytes, w->blocks_per_sm = c.per_sm;
  };
  auto run = [&](PackedWeight& W, const float* x, float* y, int n, int64_t ny, const Cfg& c, const MatvecFusion* fu,
                 PackedWeight* more0, PackedWeight* more1) {
    set(&W, c), set(more0, c), set(more1, c);
    EXPECT_EQ(cudaMemset(y, 0xff, n * ny * 4), cudaSuccess);
    if (fu) EXPECT_TRUE(matvec_fused(W, x, y, n, *fu, nullptr));
    else matvec(W, x, y, n, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> h(static_cast<size_t>(n * ny));
    EXPECT_EQ(cudaMemcpy(h.data(), y, n * ny * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float f : h) EXPECT_TRUE(std::isfinite(f));
    return h;
  };
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::F16}) {
    const int64_t shapes[][2] = {{67, 768}, {9000, 512}, {4500, 2560}};
    for (const auto& sh : shapes)
      for (int n : {1, 3}) {
        const int64_t rows = sh[0], cols = sh[1];
        SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n " +
                     std::to_string(n));
        const auto blocks = testing::random_blocks(t, cols, rows, 60 + rows);
        PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
        const auto x = testing::random_x(n * cols, 61 + rows);
        DeviceBuffer<float> dx(x.size()), dy(n * rows);
        ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
        const auto a = run(W, dx.p, dy.p, n, rows, Cfg{0, 0}, nullptr, nullptr, nullptr);
        for (const Cfg& c : cfgs) {
          const auto b = run(W, dx.p, dy.p, n, rows, c, nullptr, nullptr, nullptr);
          ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << c.bytes << " " << c.per_sm;
        }
      }
    if (t == GgmlType::F16 || t == GgmlType::Q5_K) continue;  // the fusions below: the planar formats
    // Fused: norm + Q|K|V-like matrices and the SwiGLU pair.
    const int64_t cols = 2560, r0 = 1024, r1 = 256, r2 = 96;
    SCOPED_TRACE(std::string(type_name(t)) + " fused");
    const auto b0 = testing::random_blocks(t, cols, r0, 70), b1 = testing::random_blocks(t, cols, r1, 71),
               b2 = testing::random_blocks(t, cols, r2, 72), b3 = testing::random_blocks(t, cols, r0, 73);
    PackedWeight W0 = pack_weight(ctx, t, cols, r0, b0.data()), W1 = pack_weight(ctx, t, cols, r1, b1.data()),
                 W2 = pack_weight(ctx, t, cols, r2, b2.data()), W3 = pack_weight(ctx, t, cols, r0, b3.data());
    const auto x = testing::random_x(cols, 74), nw = testing::random_x(cols, 75);
    DeviceBuffer<float> dx(cols), dn(cols), dy(r0 + r1 + r2);
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dn.p, nw.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
    MatvecFusion fu;
    fu.more[0] = &W1, fu.more[1] = &W2;
    fu.y_more[0] = dy.p + r0, fu.y_more[1] = dy.p + r0 + r1;
    fu.epi[0] = 0, fu.epi[1] = 2, fu.epi[2] = 2;
    fu.norm_w = dn.p, fu.eps = 1e-6f;
    MatvecFusion sw;
    sw.more[0] = &W3, sw.swiglu = true, sw.norm_w = dn.p, sw.eps = 1e-6f;
    const auto a = run(W0, dx.p, dy.p, 1, r0 + r1 + r2, Cfg{0, 0}, &fu, &W1, &W2);
    const auto c = run(W0, dx.p, dy.p, 1, r0, Cfg{0, 0}, &sw, &W3, nullptr);
    for (const Cfg& g : cfgs) {
      const auto b = run(W0, dx.p, dy.p, 1, r0 + r1 + r2, g, &fu, &W1, &W2);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << g.bytes << " " << g.per_sm;
      const auto d = run(W0, dx.p, dy.p, 1, r0, g, &sw, &W3, nullptr);
      ASSERT_EQ(std::memcmp(c.data(), d.data(), c.size() * 4), 0) << g.bytes << " " << g.per_sm;
    }
  }
}

// x staged in shared memory by cp.async before it is rounded (Context::set_stage_x,
// PackedWeight::stage_x: MvFuse::stage_x) reads the same values into the same rounding: every
// row's bits equal those of the unstaged prologue, for the int8-x formats (pipelined and not),
// n = 1, 3 and 8 (8 rows of 9728 columns do not fit the staging bound: the unstaged launch), and
// widths of one to several rounding steps of the block.
TEST(MatvecCudaStageX, StagedXGivesTheSameBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::IQ4_XS}) {
    const int64_t shapes[][2] = {{67, 768}, {9000, 512}, {700, 9728}, {2560, 4096}};
    for (const auto& sh : shapes)
      for (int n : {1, 3, 8}) {
        const int64_t rows = sh[0], cols = sh[1];
        SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n " +
                     std::to_string(n));
        const auto blocks = testing::random_blocks(t, cols, rows, 80 + rows);
        PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
        ASSERT_TRUE(W.int8_x);
        const auto x = testing::random_x(n * cols, 81 + rows);
        DeviceBuffer<float> dx(x.size()), dy(n * rows);
        ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
        std::vector<float> out[2];
        for (int staged = 0; staged < 2; ++staged) {
          W.stage_x = staged == 1;
          ASSERT_EQ(cudaMemset(dy.p, 0xff, n * rows * 4), cudaSuccess);
          matvec(W, dx.p, dy.p, n, nullptr);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          out[staged].resize(static_cast<size_t>(n * rows));
          ASSERT_EQ(cudaMemcpy(out[staged].data(), dy.p, n * rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        }
        for (float f : out[0]) ASSERT_TRUE(std::isfinite(f));
        ASSERT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0);
      }
  }
}

// int8-x launches as thread block clusters (Context::set_cluster, PackedWeight::cluster:
// MvFuse::cluster): each block rounds its share of x into every block's shared memory, the same
// bytes as each block rounding all of x, so every row's bits equal the launch without a
// cluster: planar and raw-block int8-x formats (Q8_0 and Q8_K rounding), plain, with x staged,
// with the norm prologue and the SwiGLU pair; n = 1, 3 and 8; widths of one to several rounding
// steps, and row counts too small for two clusters (the launch then takes none).
TEST(MatvecCudaCluster, ClustersGiveTheSameBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q2_K, GgmlType::IQ2_XXS}) {
    const int64_t shapes[][2] = {{5, 512}, {67, 768}, {9000, 512}, {700, 9728}, {2560, 4096}};
    for (const auto& sh : shapes)
      for (int n : {1, 3, 8}) {
        const int64_t rows = sh[0], cols = sh[1];
        SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n " +
                     std::to_string(n));
        const auto blocks = testing::random_blocks(t, cols, rows, 90 + rows);
        const auto b1 = testing::random_blocks(t, cols, rows, 91 + rows);
        PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
        PackedWeight W1 = pack_weight(ctx, t, cols, rows, b1.data());
        ASSERT_TRUE(W.int8_x);
        const auto x = testing::random_x(n * cols, 92 + rows), nw = testing::random_x(cols, 93 + rows);
        DeviceBuffer<float> dx(x.size()), dn(cols), dy(n * rows);
        ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dn.p, nw.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
        MatvecFusion norm;
        norm.norm_w = dn.p, norm.eps = 1e-6f;
        MatvecFusion pair = norm;
        pair.more[0] = &W1, pair.swiglu = true;
        // kind 0: plain, 1: x staged, 2: the norm prologue, 3: norm + SwiGLU pair
        for (int kind = 0; kind < 4; ++kind) {
          std::vector<float> ref;
          for (int c : {0, 2, 4, 8}) {
            W.cluster = W1.cluster = c;
            W.stage_x = kind == 1;
            ASSERT_EQ(cudaMemset(dy.p, 0xff, n * rows * 4), cudaSuccess);
            if (kind < 2) {
              matvec(W, dx.p, dy.p, n, nullptr);
            } else if (!matvec_fused(W, dx.p, dy.p, n, kind == 2 ? norm : pair, nullptr)) {
              break;  // this n cannot fuse it (shared memory): nothing to compare
            }
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << kind << " " << c;
            std::vector<float> out(static_cast<size_t>(n * rows));
            ASSERT_EQ(cudaMemcpy(out.data(), dy.p, n * rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            for (float f : out) ASSERT_TRUE(std::isfinite(f)) << kind << " " << c;
            if (c == 0) ref = out;
            else ASSERT_EQ(std::memcmp(ref.data(), out.data(), out.size() * 4), 0) << kind << " " << c;
          }
        }
      }
  }
}

// x rounded once per launch by xq_preround_kernel (Context::set_preround, MvFuse::xq_global):
// the bytes every block would round itself, so every row's bits equal the launch without it:
// planar and raw-block int8-x formats (Q8_0 and Q8_K rounding, part sizes 32..256), plain, a
// two-matrix group, the norm prologue and the norm + SwiGLU pair; n = 1..8; widths of one
// rounding chunk to the widest x that fits (17408 columns: the 27B's down projection).
TEST(MatvecCudaPreround, RoundedOnceGivesTheSameBits) {
  DF_SKIP_WITHOUT_GPU();
  Context ctx(true, true, true);
  ctx.set_preround(1);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q2_K,
                     GgmlType::IQ2_XXS}) {
    const int64_t shapes[][2] = {{5, 256}, {67, 768}, {700, 9728}, {96, 17408}, {2560, 4096}};
    for (const auto& sh : shapes)
      for (int n = 1; n <= kMaxRows; ++n) {
        const int64_t rows = sh[0], cols = sh[1];
        SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols) + " n " +
                     std::to_string(n));
        const auto blocks = testing::random_blocks(t, cols, rows, 190 + rows);
        const auto b1 = testing::random_blocks(t, cols, rows, 191 + rows);
        PackedWeight W = pack_weight(ctx, t, cols, rows, blocks.data());
        PackedWeight W1 = pack_weight(ctx, t, cols, rows, b1.data());
        ASSERT_TRUE(W.int8_x);
        ASSERT_NE(W.preround_buf, nullptr);
        const auto x = testing::random_x(n * cols, 192 + rows + n), nw = testing::random_x(cols, 193 + rows);
        DeviceBuffer<float> dx(x.size()), dn(cols), dy(n * rows), dy1(n * rows);
        ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(dn.p, nw.data(), cols * 4, cudaMemcpyHostToDevice), cudaSuccess);
        MatvecFusion group;
        group.more[0] = &W1, group.y_more[0] = dy1.p;
        MatvecFusion norm;
        norm.norm_w = dn.p, norm.eps = 1e-6f;
        MatvecFusion pair = norm;
        pair.more[0] = &W1, pair.swiglu = true;
        // kind 0: plain, 1: a two-matrix group, 2: the norm prologue, 3: norm + SwiGLU pair
        for (int kind = 0; kind < 4; ++kind) {
          std::vector<float> ref;
          for (int64_t pre : {int64_t{0}, int64_t{1}}) {
            W.preround_min = W1.preround_min = pre;
            ASSERT_EQ(cudaMemset(dy.p, 0xff, n * rows * 4), cudaSuccess);
            ASSERT_EQ(cudaMemset(dy1.p, 0xff, n * rows * 4), cudaSuccess);
            if (kind == 0) {
              matvec(W, dx.p, dy.p, n, nullptr);
            } else if (!matvec_fused(W, dx.p, dy.p, n, kind == 1 ? group : kind == 2 ? norm : pair, nullptr)) {
              break;  // this n cannot fuse it (shared memory): nothing to compare
            }
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << kind << " " << pre;
            std::vector<float> out(static_cast<size_t>(2 * n * rows));
            ASSERT_EQ(cudaMemcpy(out.data(), dy.p, n * rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            ASSERT_EQ(cudaMemcpy(out.data() + n * rows, dy1.p, n * rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
            if (kind != 1) out.resize(static_cast<size_t>(n * rows));
            for (float f : out) ASSERT_TRUE(std::isfinite(f)) << kind << " " << pre;
            if (pre == 0) ref = out;
            else ASSERT_EQ(std::memcmp(ref.data(), out.data(), out.size() * 4), 0) << "kind " << kind;
          }
        }
      }
  }
}

TEST(MatvecCudaErrors, BadArguments) {
  DF_SKIP_WITHOUT_GPU();
  EXPECT_THROW(packed_bytes(GgmlType::Q4_K, 100, 4), Error);  // not a multiple of 256
  EXPECT_THROW(packed_bytes(GgmlType::F16, 12, 4), Error);    // float rows: multiples of 8
  EXPECT_THROW(packed_bytes(GgmlType::Q8_1, 64, 4), Error);   // not a weight format
  Context ctx;
  const auto blocks = testing::random_blocks(GgmlType::Q8_0, 64, 4, 1);
  PackedWeight W = pack_weight(ctx, GgmlType::Q8_0, 64, 4, blocks.data());
  DeviceBuffer<float> dx(9 * 64), dy(9 * 4);
  EXPECT_THROW(matvec(W, dx.p, dy.p, 0, nullptr), Error);
  EXPECT_THROW(matvec(W, dx.p, dy.p, 9, nullptr), Error);
  EXPECT_THROW(matvec(W, dx.p + 1, dy.p, 1, nullptr), Error);  // x not 16-byte aligned
}

}  // namespace
}  // namespace df::cudamv
