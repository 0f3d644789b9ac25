// The prefill GEMM's paths (src/backend/cuda/gemm) against the CPU reference (src/quant
// dequantize_ref, f64 dot) for every weight format: the tile kernel and the three slab modes of
// the cuBLAS path (gemm::Blas) with slabs small enough that a matrix takes several of them (rows,
// columns accumulated in y, rows piped through the two halves on a side stream), every output
// written (NaN poison), the Tuner's pick the same function (and a tile for n <= 64); an n that
// is no multiple of the tiles. Budget: f16 operands (relative 2^-11 each), f32 sums: NMSE ~1e-7; 1e-5 held.
// Skipped with a message when no GPU is present.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"
#include "matvec_testing.h"

namespace df::cuda::gemm {
namespace {

namespace mt = cudamv::testing;
constexpr double kBudget = 1e-5;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  explicit DeviceBuffer(size_t n) { EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
};

TEST(CudaGemm, TilesAndBlasSlabsEveryFormat) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA GEMM tests need a GPU";
  cudamv::Context ctx;
  Blas blas;
  const int64_t rows = 600, cols = 1024;  // 600: no multiple of 128 (a partial slab and tile)
  const int n = 77;
  for (GgmlType t : mt::all_weight_types()) {
    SCOPED_TRACE(std::string(type_name(t)));
    const auto blocks = mt::random_blocks(t, cols, rows, 500 + static_cast<uint64_t>(t));
    const auto w = mt::dequant_rows(t, blocks.data(), cols, rows);
    const auto x = mt::random_x(n * cols, 501);
    const auto ref = mt::reference(w, x, cols, rows, n);
    const cudamv::PackedWeight W = cudamv::pack_weight(ctx, t, cols, rows, blocks.data());
    ASSERT_TRUE(supported(W));
    DeviceBuffer<float> dx(x.size()), dy(static_cast<size_t>(n) * rows);
    DeviceBuffer<uint16_t> dxh(x.size());
    ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    convert_x_f16(dx.p, cols, n, cols, dxh.p, nullptr);
    auto check = [&](const std::string& what, auto&& run) {
      ASSERT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), cudaSuccess);  // NaN poison
      ASSERT_TRUE(run()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      std::vector<float> y(static_cast<size_t>(n) * rows);
      ASSERT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_LE(mt::nmse(y.data(), ref.data(), y.size()), kBudget) << what;  // inf for an unwritten NaN
    };
    check("tile kernel", [&] { return gemm_variant(W, dxh.p, n, dy.p, rows, 0, nullptr); });
    // slabs: rows 128 a slab (5), columns 256 a slab (4), piped rows 128 a half (5)
    check("blas rows", [&] { return blas.gemm(W, dxh.p, n, dy.p, rows, nullptr, false, 1, 128 * cols * 2); });
    check("blas cols", [&] { return blas.gemm(W, dxh.p, n, dy.p, rows, nullptr, false, 2, rows * 256 * 2); });
    check("blas piped", [&] { return blas.gemm(W, dxh.p, n, dy.p, rows, nullptr, false, 3, 2 * 128 * cols * 2); });
    check("blas default", [&] { return blas.gemm(W, dxh.p, n, dy.p, rows, nullptr, false); });
    Tuner tuner;
    check("tuner", [&] { return tuner.gemm(W, dxh.p, n, dy.p, rows, nullptr, false), true; });
    EXPECT_GE(tuner.picked(W, n), 1);
    check("tuner, tuned", [&] { return tuner.gemm(W, dxh.p, n, dy.p, rows, nullptr, false), true; });
    tuner.gemm(W, dxh.p, 40, dy.p, rows, nullptr, false);  // n <= kBlasMinRows: a tile (maybe split), never a slab
    EXPECT_GE(tuner.picked(W, 40) % 16, 1);
    EXPECT_LE(tuner.picked(W, 40) % 16, 4);
  }
}

// Split-K (code 4 + 16 S: the 64 x 64 tile's k steps in S ranges, partials [S][n][rows] summed in
// range order by split_sum): the f16 operands of the unsplit tile, sums in another order, so
// within f32 rounding of it (NMSE <= 1e-8) and within the GEMM budget of the f64 reference;
// the same bits on a second run; and the tuner takes it by split_k's rule for a few-row matrix
// at few x rows (600 rows: 10 tiles of 64), with those bits.
TEST(CudaGemm, SplitKIsTheTileInAnotherOrder) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA GEMM tests need a GPU";
  cudamv::Context ctx;
  const int64_t rows = 600, cols = 4096;
  int dev = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::IQ2_XXS, GgmlType::F16,
                     GgmlType::F32}) {
    const auto blocks = mt::random_blocks(t, cols, rows, 700 + static_cast<uint64_t>(t));
    const auto w = mt::dequant_rows(t, blocks.data(), cols, rows);
    const cudamv::PackedWeight W = cudamv::pack_weight(ctx, t, cols, rows, blocks.data());
    Tuner tuner;
    for (int n : {9, 17, 77, 130}) {
      SCOPED_TRACE(std::string(type_name(t)) + " n " + std::to_string(n));
      const auto x = mt::random_x(n * cols, 701);
      const auto ref = mt::reference(w, x, cols, rows, n);
      DeviceBuffer<float> dx(x.size()), dy(static_cast<size_t>(n) * rows), dp(static_cast<size_t>(16 * n) * rows);
      DeviceBuffer<uint16_t> dxh(x.size());
      ASSERT_EQ(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      convert_x_f16(dx.p, cols, n, cols, dxh.p, nullptr);
      auto get = [&] {
        std::vector<float> y(static_cast<size_t>(n) * rows);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        return y;
      };
      ASSERT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), cudaSuccess);
      ASSERT_TRUE(gemm_variant(W, dxh.p, n, dy.p, rows, 4, nullptr));
      const auto unsplit = get();
      EXPECT_LE(mt::nmse(unsplit.data(), ref.data(), unsplit.size()), kBudget);
      const std::vector<double> unsplit64(unsplit.begin(), unsplit.end());
      auto split = [&](int s) {
        EXPECT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), cudaSuccess);
        EXPECT_TRUE(gemm_variant(W, dxh.p, n, dp.p, rows, 4 + 16 * s, nullptr));
        split_sum(dp.p, s, n, rows, dy.p, rows, nullptr);
        return get();
      };
      for (int s : {2, 5, 16}) {
        const auto y = split(s);
        // f32 sums of partials in another grouping (and the mma's own f32 accumulation): up to
        // 4.2e-10 measured on an H100 (F16 weights), three decades under the budget
        EXPECT_LE(mt::nmse(y.data(), unsplit64.data(), y.size()), 1e-8) << "splits " << s;
        EXPECT_LE(mt::nmse(y.data(), ref.data(), y.size()), kBudget) << "splits " << s;
        const auto again = split(s);
        EXPECT_EQ(0, std::memcmp(y.data(), again.data(), y.size() * 4)) << "splits " << s;
      }
      const int rule = split_k(rows, n, cols, sms);
      ASSERT_GE(rule, 2);  // 10 x ceil(n / 64) tiles: fewer than two a multiprocessor
      const auto by_rule = split(rule);
      ASSERT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), cudaSuccess);
      tuner.gemm(W, dxh.p, n, dy.p, rows, nullptr, false);
      const auto tuned = get();
      EXPECT_EQ(tuner.picked(W, n), 4 + 16 * rule);
      EXPECT_EQ(0, std::memcmp(tuned.data(), by_rule.data(), tuned.size() * 4));
    }
  }
}

// Blas::sgemm (CudaOptions::prefill_sgemm: F32 weights straight from their planar rows; also
// dequantized rows of a K-quant here): FP32 operands, so within f32 rounding of the
// f64 reference (NMSE ~1e-14; 1e-11 held, four decades under the f16 paths' ~1e-7), for a
// router-like F32 matrix (257 rows), a 32-row K-quant one and a 1-row gate, and strided x / y.
TEST(CudaGemm, BlasSgemmIsFp32Exact) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA GEMM tests need a GPU";
  cudamv::Context ctx;
  Blas blas;
  const int64_t cols = 2048;
  const int n = 45, xs = 2048 + 64, ys_pad = 3;
  struct Case { GgmlType t; int64_t rows; };
  for (const Case c : {Case{GgmlType::F32, 257}, Case{GgmlType::Q4_K, 32}, Case{GgmlType::F32, 1},
                       Case{GgmlType::Q6_K, 48}}) {
    SCOPED_TRACE(std::string(type_name(c.t)) + " rows " + std::to_string(c.rows));
    const int64_t rows = c.rows, ys = rows + ys_pad;
    const auto blocks = mt::random_blocks(c.t, cols, rows, 900 + static_cast<uint64_t>(rows));
    const auto w = mt::dequant_rows(c.t, blocks.data(), cols, rows);
    const auto x = mt::random_x(n * cols, 901);
    const auto ref = mt::reference(w, x, cols, rows, n);
    std::vector<float> xpad(static_cast<size_t>(n) * xs, 0.0f);
    for (int j = 0; j < n; ++j)
      for (int64_t i = 0; i < cols; ++i) xpad[j * xs + i] = x[j * cols + i];
    DeviceBuffer<float> dx(xpad.size()), dy(static_cast<size_t>(n) * ys), dw(w.size());
    ASSERT_EQ(cudaMemcpy(dx.p, xpad.data(), xpad.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    const float* W = dw.p;
    int64_t ws = cols;
    cudamv::PackedWeight P;
    if (c.t == GgmlType::F32) {  // the planar rows themselves
      P = cudamv::pack_weight(ctx, c.t, cols, rows, blocks.data());
      W = reinterpret_cast<const float*>(P.data), ws = static_cast<int64_t>(P.q_row_bytes / 4);
    } else {  // the backend's get_rows into scratch is exact: the dequantized rows
      ASSERT_EQ(cudaMemcpy(dw.p, w.data(), w.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    }
    ASSERT_EQ(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * ys * 4), cudaSuccess);  // NaN poison
    ASSERT_TRUE(blas.sgemm(W, ws, rows, cols, dx.p, xs, n, dy.p, ys, nullptr, false));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> ypad(static_cast<size_t>(n) * ys), y(static_cast<size_t>(n) * rows);
    ASSERT_EQ(cudaMemcpy(ypad.data(), dy.p, ypad.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int j = 0; j < n; ++j)
      for (int64_t r = 0; r < rows; ++r) y[j * rows + r] = ypad[j * ys + r];
    EXPECT_LE(mt::nmse(y.data(), ref.data(), y.size()), 1e-11);
  }
  // not ready inside a capture before the first call: the caller takes the tiles
  Blas fresh;
  EXPECT_FALSE(fresh.sgemm(nullptr, 1, 1, 1, nullptr, 1, 1, nullptr, 1, nullptr, true));
}

}  // namespace
}  // namespace df::cuda::gemm
