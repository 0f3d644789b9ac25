// Internal: launching mv_kernel (kernels_fast.cuh) with a persistent grid, and the per-n
// default configuration. Included by the family_*.cu files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/kernels_fast.cuh"

namespace df::cudamv {

constexpr size_t kMaxSmem = 200 * 1024;  // x copies above this read x from global memory

// Warps per output row of a launch: rows (SwiGLU pairs count twice) spread over at least
// ~8448 warp-rows (two blocks of 16 rows per SM for two waves on the H200's 132 SMs),
// at most 8, and no more than leave every thread a part. A function of the matrices alone
// (never of n): a row's summation order, and so its bits, are the same for every n.
inline int mv_wpr(int64_t row_units, int64_t nparts) {
  int w = 1;
  while (w < kWarps && row_units * w < 8448 && nparts >= 64 * w) w *= 2;
  return w;
}

template <class A, int N, int RW, int U, bool kSmem>
void launch_persistent(const PlanarView& v, const float* x, float* y, size_t smem, cudaStream_t s,
                       const MvFuse& f) {
  const auto kernel = mv_kernel<A, N, RW, U, kSmem>;
  int dev = 0, sms = 1, occ = 1;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, kWarps * 32, smem);
  const bool pair = RW == 2 && f.swiglu;
  int64_t units = f.swiglu ? 2 * v.rows : v.rows;
  for (int i = 0; !f.swiglu && i + 1 < f.nmat; ++i) units += f.rows[i];
  const int wpr = mv_wpr(units, v.cols / A::kPartElems);
  const int64_t per_group = pair ? kWarps / wpr : kWarps / wpr * RW;
  int64_t ngroups = (v.rows + per_group - 1) / per_group;
  for (int i = 0; !pair && i + 1 < f.nmat; ++i) ngroups += (f.rows[i] + per_group - 1) / per_group;
  // Routed experts: one grid row per slot, the resident blocks shared among the rows.
  const int64_t slots = f.ids ? f.n_slots : 1;
  const int64_t resident = int64_t{sms} * std::max(occ, 1);
  const int64_t blocks = std::min<int64_t>(ngroups, std::max<int64_t>(1, (resident + slots - 1) / slots));
  kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(slots)), kWarps * 32, smem, s>>>(v, x, y, f, wpr);
}

// Whether a launch of (A, N, RW) can do the fusions of f: the norm prologue needs the
// shared-memory x, the SwiGLU pair two rows per warp.
template <class A, int N, int RW>
bool can_fuse(const PlanarView& v, const MvFuse& f, bool allow_smem = !A::kGlobalX) {
  const bool smem = allow_smem && xs_bytes(N, v.cols, A::kSums) <= kMaxSmem;
  return (!f.norm_w || smem) && (!f.swiglu || RW == 2);
}

template <class A, int N, int RW, int U>
void launch_mv(const PlanarView& v, const float* x, float* y, cudaStream_t s, bool allow_smem = !A::kGlobalX,
               const MvFuse& f = MvFuse{}) {
  const size_t smem = xs_bytes(N, v.cols, A::kSums);
  if (allow_smem && smem <= kMaxSmem)
    launch_persistent<A, N, RW, U, true>(v, x, y, smem, s, f);
  else
    launch_persistent<A, N, RW, U, false>(v, x, y, 0, s, f);
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

// Launches with the fusions of f; false (nothing launched) when this n cannot fuse them.
template <class A, int N>
bool launch_mv_fused(const PlanarView& v, const float* x, float* y, const MvFuse& f, cudaStream_t s) {
  constexpr int RW = DefaultConfig<A, N>::kRW, U = DefaultConfig<A, N>::kU;
  if (!can_fuse<A, N, RW>(v, f)) return false;
  launch_mv<A, N, RW, U>(v, x, y, s, !A::kGlobalX, f);
  return true;
}

template <class A>
bool launch_mv_default(const PlanarView& v, const float* x, float* y, int n, cudaStream_t s,
                       const MvFuse& f = MvFuse{}) {
  switch (n) {
    case 1: return launch_mv_fused<A, 1>(v, x, y, f, s);
    case 2: return launch_mv_fused<A, 2>(v, x, y, f, s);
    case 3: return launch_mv_fused<A, 3>(v, x, y, f, s);
    case 4: return launch_mv_fused<A, 4>(v, x, y, f, s);
    case 5: return launch_mv_fused<A, 5>(v, x, y, f, s);
    case 6: return launch_mv_fused<A, 6>(v, x, y, f, s);
    case 7: return launch_mv_fused<A, 7>(v, x, y, f, s);
    default: return launch_mv_fused<A, 8>(v, x, y, f, s);
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
