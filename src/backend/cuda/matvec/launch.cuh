// Internal: launching mv_kernel (kernels_fast.cuh) with a persistent grid, and the per-n
// default configuration. Included by the family_*.cu files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/kernels_fast.cuh"

namespace df::cudamv {

constexpr size_t kMaxSmem = 200 * 1024;  // x copies above this read x from global memory

template <class A, int N, int RW, int U, bool kSmem>
void launch_persistent(const PlanarView& v, const float* x, float* y, size_t smem, cudaStream_t s) {
  const auto kernel = mv_kernel<A, N, RW, U, kSmem>;
  int dev = 0, sms = 1, occ = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kWarps * 32, smem);
  const int64_t ngroups = (v.rows + kWarps * RW - 1) / (kWarps * RW);
  const int64_t blocks = std::min<int64_t>(ngroups, int64_t{sms} * std::max(occ, 1));
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, smem, s>>>(v, x, y);
}

template <class A, int N, int RW, int U>
void launch_mv(const PlanarView& v, const float* x, float* y, cudaStream_t s, bool allow_smem = !A::kGlobalX) {
  const size_t smem = xs_bytes(N, v.cols, A::kSums);
  if (allow_smem && smem <= kMaxSmem)
    launch_persistent<A, N, RW, U, true>(v, x, y, smem, s);
  else
    launch_persistent<A, N, RW, U, false>(v, x, y, 0, s);
}

// Allows the shared-memory kernel its largest x copy (called once per Context).
template <class A, int N, int RW, int U>
void prepare_mv() {
  cudaFuncSetAttribute(mv_kernel<A, N, RW, U, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(kMaxSmem));
}

// The default (RW, U) per n (measured on the H200, docs in bench/cuda/README.md): two rows per
// warp for small n, two parts in flight per lane, one for the 3-word parts of Q6_K.
template <class A, int N>
struct DefaultConfig {
  static constexpr int kRW = N <= 2 ? 2 : 1;
  static constexpr int kU = A::kLoads >= 3 || N > 2 ? 1 : 2;
};

template <class A>
void launch_mv_default(const PlanarView& v, const float* x, float* y, int n, cudaStream_t s) {
  switch (n) {
    case 1: launch_mv<A, 1, DefaultConfig<A, 1>::kRW, DefaultConfig<A, 1>::kU>(v, x, y, s); break;
    case 2: launch_mv<A, 2, DefaultConfig<A, 2>::kRW, DefaultConfig<A, 2>::kU>(v, x, y, s); break;
    case 3: launch_mv<A, 3, DefaultConfig<A, 3>::kRW, DefaultConfig<A, 3>::kU>(v, x, y, s); break;
    case 4: launch_mv<A, 4, DefaultConfig<A, 4>::kRW, DefaultConfig<A, 4>::kU>(v, x, y, s); break;
    case 5: launch_mv<A, 5, DefaultConfig<A, 5>::kRW, DefaultConfig<A, 5>::kU>(v, x, y, s); break;
    case 6: launch_mv<A, 6, DefaultConfig<A, 6>::kRW, DefaultConfig<A, 6>::kU>(v, x, y, s); break;
    case 7: launch_mv<A, 7, DefaultConfig<A, 7>::kRW, DefaultConfig<A, 7>::kU>(v, x, y, s); break;
    default: launch_mv<A, 8, DefaultConfig<A, 8>::kRW, DefaultConfig<A, 8>::kU>(v, x, y, s); break;
  }
}

template <class A>
void prepare_mv_default() {
  prepare_mv<A, 1, DefaultConfig<A, 1>::kRW, DefaultConfig<A, 1>::kU>();
  prepare_mv<A, 2, DefaultConfig<A, 2>::kRW, DefaultConfig<A, 2>::kU>();
  prepare_mv<A, 3, DefaultConfig<A, 3>::kRW, DefaultConfig<A, 3>::kU>();
  prepare_mv<A, 4, DefaultConfig<A, 4>::kRW, DefaultConfig<A, 4>::kU>();
  prepare_mv<A, 5, DefaultConfig<A, 5>::kRW, DefaultConfig<A, 5>::kU>();
  prepare_mv<A, 6, DefaultConfig<A, 6>::kRW, DefaultConfig<A, 6>::kU>();
  prepare_mv<A, 7, DefaultConfig<A, 7>::kRW, DefaultConfig<A, 7>::kU>();
  prepare_mv<A, 8, DefaultConfig<A, 8>::kRW, DefaultConfig<A, 8>::kU>();
}

template <class... As>
struct AdapterList {};

}  // namespace df::cudamv
