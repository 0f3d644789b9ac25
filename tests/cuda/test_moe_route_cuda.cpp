// The MoE router's two kernels (ops/moe.cuh launch_moe_route*, MoeRouteKernel): the warp
// kernel gives the block kernel's ids and weight bits on logits with many ties (equal logits,
// and probabilities that underflow to 0 so that some rows' top-k must choose among zeros), for
// 1..8 rows, 256 and 512 experts (and small counts: partly used lanes), k 8 and 10, with and
// without normalisation, scale and the extra slot, launched with and without PDL.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/ops/moe.cuh"

namespace df::cuda {
namespace {

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

// n rows of E logits at row stride `stride`: row kinds by r % 4: small integers times 0.5
// (many equal logits), all equal, three values then -1000 (p = 0 after the third expert:
// k > 3 chooses among zeros), normal noise.
std::vector<float> tied_logits(int64_t n, int64_t E, int64_t stride, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> small(-3, 3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n * stride), NAN);  // NaN between rows: never read
  for (int64_t r = 0; r < n; ++r)
    for (int64_t e = 0; e < E; ++e) {
      float& v = x[static_cast<size_t>(r * stride + e)];
      switch (r % 4) {
        case 0: v = 0.5f * static_cast<float>(small(g)); break;
        case 1: v = 1.25f; break;
        case 2: v = e % 97 == 5 ? 0.5f * static_cast<float>(small(g)) : -1000.0f; break;
        default: v = nd(g); break;
      }
    }
  return x;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

Routed route(const DeviceBuffer<float>& logits, int64_t stride, int64_t n, int64_t E, int64_t k, bool normalize,
             float scale, const DeviceBuffer<float>* extra, MoeRouteKernel kernel, bool pdl, cudaStream_t s) {
  const int64_t ld = extra ? k + 1 : k;
  const size_t count = static_cast<size_t>(n * ld);
  DeviceBuffer<int32_t> ids(count);
  DeviceBuffer<float> w(count);
  EXPECT_EQ(cudaMemsetAsync(ids.p, 0x7f, count * sizeof(int32_t), s), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(w.p, 0x7f, count * sizeof(float), s), cudaSuccess);
  if (extra)
    launch_moe_route_extra(logits.p, stride, n, E, k, normalize, scale, extra->p, 2, ids.p, w.p, s, kernel, pdl);
  else
    launch_moe_route(logits.p, stride, n, E, k, normalize, scale, ids.p, w.p, s, kernel, pdl);
  Routed out{std::vector<int32_t>(count), std::vector<float>(count)};
  EXPECT_EQ(cudaMemcpyAsync(out.ids.data(), ids.p, count * sizeof(int32_t), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(out.w.data(), w.p, count * sizeof(float), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return out;
}

TEST(MoeRouteCuda, WarpKernelIsTheBlockKernelsBits) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device: the CUDA MoE router tests need a GPU";
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  int64_t tied_choices = 0, zero_choices = 0;
  for (int64_t E : {256, 512, 8, 60, 100}) {
    for (int64_t k : {8, 10}) {
      if (k > E) continue;
      for (int64_t n = 1; n <= 8; ++n) {
        const int64_t stride = E + 3;
        const auto x = tied_logits(n, E, stride, static_cast<uint32_t>(1000 * E + 10 * k + n));
        DeviceBuffer<float> logits(x.size());
        ASSERT_EQ(cudaMemcpy(logits.p, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        std::vector<float> gates(static_cast<size_t>(2 * n));
        for (size_t i = 0; i < gates.size(); ++i) gates[i] = 0.125f * static_cast<float>(i) + 0.01f;
        DeviceBuffer<float> extra(gates.size());
        ASSERT_EQ(cudaMemcpy(extra.p, gates.data(), gates.size() * sizeof(float), cudaMemcpyHostToDevice),
                  cudaSuccess);
        struct Mode { bool normalize; float scale; bool extra; };
        for (const Mode md : {Mode{true, 0.0f, false}, Mode{false, 0.0f, false}, Mode{true, 2.5f, false},
                              Mode{true, 0.0f, true}, Mode{false, 1.0f, true}}) {
          const std::string what = "E=" + std::to_string(E) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                                   " normalize=" + std::to_string(md.normalize) + " scale=" +
                                   std::to_string(md.scale) + " extra=" + std::to_string(md.extra);
          const DeviceBuffer<float>* ex = md.extra ? &extra : nullptr;
          const Routed ref = route(logits, stride, n, E, k, md.normalize, md.scale, ex, MoeRouteKernel::block, false, s);
          const int64_t ld = md.extra ? k + 1 : k;
          // the block kernel's result is a routing: distinct ids in [0, E), weights not increasing
          for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < k; ++j) {
              const size_t i = static_cast<size_t>(r * ld + j);
              ASSERT_GE(ref.ids[i], 0) << what;
              ASSERT_LT(ref.ids[i], E) << what;
              for (int64_t j2 = 0; j2 < j; ++j2) ASSERT_NE(ref.ids[static_cast<size_t>(r * ld + j2)], ref.ids[i]) << what;
              if (j > 0) {
                ASSERT_LE(ref.w[i], ref.w[i - 1]) << what;
                if (ref.w[i] == ref.w[i - 1]) ++tied_choices;
              }
              if (ref.w[i] == 0.0f) ++zero_choices;
            }
          for (const bool pdl : {false, true}) {
            const Routed got = route(logits, stride, n, E, k, md.normalize, md.scale, ex, MoeRouteKernel::warp, pdl, s);
            EXPECT_EQ(got.ids, ref.ids) << what << " pdl=" << pdl;
            ASSERT_EQ(got.w.size(), ref.w.size());
            EXPECT_EQ(std::memcmp(got.w.data(), ref.w.data(), got.w.size() * sizeof(float)), 0)
                << what << " pdl=" << pdl << ": weight bits";
          }
        }
      }
    }
  }
  EXPECT_GT(tied_choices, 0) << "the logits must make the top-k choose among equal probabilities";
  EXPECT_GT(zero_choices, 0) << "the logits must make some top-k choose among zero probabilities";
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
}  // namespace df::cuda
