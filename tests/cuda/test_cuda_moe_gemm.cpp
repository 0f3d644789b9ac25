// The grouped tensor-core GEMM of the routed experts (CudaOptions::moe_gemm, gemm/grouped.cuh)
// against the grouped matvec path it replaces for prefill (a backend without the flag) and
// against the CPU reference: matmul_id_swiglu (gate/up with SwiGLU in the epilogue) and
// matmul_id (down, one x row per slot) at 20 and 300 rows (experts with no slots, with
// one tile and with several; outputs poisoned with NaN first, so every slot must be written),
// for formats of each family of the tile kernel (planar Q4_K, Q8_0, Q6_K, Q5_K; raw IQ2_XS).
// Budgets (not bits): the GEMM rounds x and the weights to f16 (relative 2^-11), the matvec
// path rounds x to int8 blocks for its dp4a formats, the CPU reference its activations to the
// weight's dot format: one product 1e-4, gate/up through SwiGLU (two chained products) 5e-4,
// as the existing MoE op tests hold the grouped matvec path. Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../unit/op_test_util.h"
#include "cuda_test_util.h"
#include "matvec_testing.h"

namespace df::cudatest {
namespace {

using optest::nerr;
using optest::randn;
namespace mt = cudamv::testing;

cuda::CudaBackend& gemm_backend() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.moe_gemm = true;
    return o;
  }());
  return b;
}

// k distinct experts of E per row; a skewed draw (some experts get many slots, some none).
std::vector<int32_t> random_routing(int64_t n, int64_t k, int64_t E, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int32_t> row;
    while (static_cast<int64_t>(row.size()) < k) {
      const auto u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
      const auto e = static_cast<int32_t>(static_cast<double>(E) * u * u);  // low ids more often
      if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
    }
    ids.insert(ids.end(), row.begin(), row.end());
  }
  return ids;
}

// One MoE block's routed products on backend b: gate/up + SwiGLU of x [n, dim] and down of
// h [n k, ff] (a row per slot), outputs poisoned with NaN first. Returns {gate, y}.
struct MoeCase {
  GgmlType t;
  int64_t E, k, dim, ff, n;
  std::vector<uint8_t> gq, uq, dq;  // the stacks' blocks
  std::vector<int32_t> ids;
  std::vector<float> xs, hs;
};

MoeCase make_case(GgmlType t, int64_t E, int64_t k, int64_t dim, int64_t ff, int64_t n, uint32_t seed) {
  MoeCase c;
  c.t = t, c.E = E, c.k = k, c.dim = dim, c.ff = ff, c.n = n;
  c.gq = mt::random_blocks(t, dim, E * ff, seed + 100 + static_cast<uint64_t>(t));
  c.uq = mt::random_blocks(t, dim, E * ff, seed + 200 + static_cast<uint64_t>(t));
  c.dq = mt::random_blocks(t, ff, E * dim, seed + 300 + static_cast<uint64_t>(t));
  c.ids = random_routing(n, k, E, static_cast<uint32_t>(seed / 20 + 1 + n));  // seed 600: the data of 31 + n, 41 + n, 51 + n
  c.xs = randn(static_cast<size_t>(n * dim), seed / 20 + 11 + n);
  c.hs = randn(static_cast<size_t>(n * k * ff), seed / 20 + 21 + n);
  return c;
}

std::vector<std::vector<float>> run_case(Backend& b, const MoeCase& c) {
  const Tensor G = b.weight_stack(c.t, c.dim, c.ff, c.E, c.gq.data());
  const Tensor U = b.weight_stack(c.t, c.dim, c.ff, c.E, c.uq.data());
  const Tensor D = b.weight_stack(c.t, c.ff, c.dim, c.E, c.dq.data());
  auto ids = put(b, GgmlType::I32, c.k, c.n, c.ids.data());
  auto x = put_f32(b, c.xs, c.dim);
  auto gate = put_f32(b, std::vector<float>(static_cast<size_t>(c.n * c.k * c.ff), NAN), c.ff);
  auto up = put_f32(b, std::vector<float>(static_cast<size_t>(c.n * c.k * c.ff), NAN), c.ff);
  b.matmul_id_swiglu(G, U, c.E, x.t, ids.t, gate.t, up.t);
  auto h = put_f32(b, c.hs, c.ff);
  auto y = put_f32(b, std::vector<float>(static_cast<size_t>(c.n * c.k * c.dim), NAN), c.dim);
  b.matmul_id(D, c.E, h.t, ids.t, y.t);
  return {get_f32(b, gate.t), get_f32(b, y.t)};
}

TEST(CudaMoeGemm, GroupedGemmAgainstGroupedMatvecAndCpu) {
  DF_REQUIRE_GPU();
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::IQ2_XS}) {
    SCOPED_TRACE(std::string(type_name(t)));
    for (int64_t n : {20, 300}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      const MoeCase c = make_case(t, 48, 8, 512, 256, n, 600);
      const auto ref = run_case(cpu_ref(), c), mv = run_case(*gpu(), c), gm = run_case(gemm_backend(), c);
      EXPECT_LE(nerr(ref[0], gm[0]), 5e-4) << "gate/up + SwiGLU, GEMM vs the CPU";
      EXPECT_LE(nerr(mv[0], gm[0]), 5e-4) << "gate/up + SwiGLU, GEMM vs the grouped matvec";
      EXPECT_LE(nerr(ref[1], gm[1]), 1e-4) << "down, GEMM vs the CPU";
      EXPECT_LE(nerr(mv[1], gm[1]), 1e-4) << "down, GEMM vs the grouped matvec";
      std::printf("%s n=%lld: NMSE gate/up vs cpu %.3g, vs matvec %.3g; down vs cpu %.3g, vs matvec %.3g\n",
                  std::string(type_name(t)).c_str(), static_cast<long long>(n), nerr(ref[0], gm[0]), nerr(mv[0], gm[0]),
                  nerr(ref[1], gm[1]), nerr(mv[1], gm[1]));
    }
  }
}

}  // namespace
}  // namespace df::cudatest
