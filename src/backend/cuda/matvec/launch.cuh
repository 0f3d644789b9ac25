// Internal: launching mv_kernel (kernels_fast.cuh) with a persistent grid, and the per-n
// default configuration. Included by the family_*.cu files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "common/error.h"

#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/kernels_fast.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cudamv {

constexpr size_t kStageSmem = 100 * 1024;  // int8 x staged by cp.async up to this (two blocks per SM)

template <class A, int N, int RW, int U, bool kSmem, int D = 0, bool kTrace = false>
void launch_persistent(const PlanarView& v, const float* x, float* y, size_t smem, cudaStream_t s,
                       const MvFuse& f) {
  const auto kernel = mv_kernel<A, N, RW, U, kSmem, D, kTrace>;
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
  const int per_sm = f.blocks_per_sm > 0 ? std::min(std::max(occ, 1), f.blocks_per_sm) : std::max(occ, 1);
  const int64_t resident = int64_t{sms} * per_sm;
  const int64_t blocks = std::min<int64_t>(ngroups, std::max<int64_t>(1, (resident + slots - 1) / slots));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(slots));
  MvFuse g = f;  // each block's share of the L2 prefetch bound
  g.l2_block_bytes = f.l2_bytes > 0 && !f.ids ? f.l2_bytes / blocks : 0;
  g.cluster = 0;
  cudaLaunchAttribute attr[2];
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kWarps * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 0;
  // A thread block cluster (f.cluster, int8-x launches with x in shared memory, not routed):
  // the grid rounded down to whole clusters that can all be resident at once (a persistent
  // grid's blocks are all resident). None where fewer than two clusters would fit.
  if constexpr (kSmem && A::kInt8X) {
    const int c = f.cluster;
    if (c > 1 && c <= 8 && !f.ids && blocks >= 2 * c) {
      attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
      attr[cfg.numAttrs].val.clusterDim.x = static_cast<unsigned>(c);
      attr[cfg.numAttrs].val.clusterDim.y = 1;
      attr[cfg.numAttrs].val.clusterDim.z = 1;
      ++cfg.numAttrs;
      cfg.gridDim.x = static_cast<unsigned>(blocks / c * c);
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
        cudaGetLastError();
        clusters = 0;
      }
      const int64_t fit = std::min<int64_t>(blocks / c, clusters);
      if (fit >= 2) {
        cfg.gridDim.x = static_cast<unsigned>(fit * c);
        g.cluster = c;
      } else {
        cfg.gridDim.x = grid.x;
        --cfg.numAttrs;
      }
    }
  }
  // Routed launches wait before they read their expert ids (so before any weight load):
  // programmatic only with f.routed_pdl (CudaOptions::moe_pdl).
  if (f.pdl && (!f.ids || f.routed_pdl)) {
    // Programmatic dependent launch: may start while the previous kernel of the stream (or
    // graph) runs; the kernel waits for it before it reads x (griddepcontrol.wait in mv_kernel).
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
    ++cfg.numAttrs;
  }
  if (cfg.numAttrs == 0) {
    kernel<<<grid, kWarps * 32, smem, s>>>(v, x, y, g, wpr);
    return;
  }
  if (cudaLaunchKernelEx(&cfg, kernel, v, x, y, g, wpr) == cudaSuccess || g.cluster == 0) return;
  // The cluster launch refused (a configuration error, raised at launch): the same launch
  // without a cluster, whose blocks each round all of x (the same bits).
  cudaGetLastError();
  g.cluster = 0;
  cfg.gridDim = grid;
  cfg.attrs = attr + 1;
  --cfg.numAttrs;
  cudaLaunchKernelEx(&cfg, kernel, v, x, y, g, wpr);
}

// xq_preround_kernel over x rows [n, cols] into out (MvFuse::xq_buf): one 256-thread block per
// rounding step of 2048 elements (eight 256-element chunks), after the previous kernel under PDL.
template <int P, bool kQ8K>
void launch_preround(const float* x, int n, int64_t cols, const float* norm_w, float eps, uint8_t* out, bool pdl,
                     cudaStream_t s) {
  const int64_t chunks = (int64_t{n} * cols / 8 + 31) / 32;
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(std::max<int64_t>(1, (chunks + 7) / 8)));
  cfg.blockDim = dim3(256);
  cfg.stream = s;
  cfg.attrs = attr;
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.numAttrs = 1;
  }
  cudaLaunchKernelEx(&cfg, xq_preround_kernel<P, kQ8K>, x, n, static_cast<int>(cols), norm_w, eps, out);
}

// Whether a launch of (A, N, RW) can do the fusions of f: the norm prologue needs the
// shared-memory x, the SwiGLU pair two rows per warp.
// Shared memory of a launch: the x copy (f32 formats) or the int8 x (and the f32 copy that
// a fused norm reads).
template <class A, int N>
size_t smem_of(int64_t cols, bool norm) {
  if constexpr (A::kInt8X) return xqw_bytes(N, cols, norm);
  else return xs_bytes(N, cols, A::kSums);
}

// Whether the int8-x kernels take a matrix of this width: their x always lives in shared
// memory, for every n up to kMaxRows (a function of cols alone: a row's bits never depend on n).
inline bool int8x_fits(int64_t cols) { return cols % 32 == 0 && xq_bytes(kMaxRows, cols, false) <= kMaxSmem; }

template <class A, int N, int RW>
bool can_fuse(const PlanarView& v, const MvFuse& f, bool allow_smem = !A::kGlobalX) {
  const bool smem = (allow_smem || A::kInt8X) && smem_of<A, N>(v.cols, f.norm_w != nullptr) <= kMaxSmem;
  return (!f.norm_w || smem) && (!f.swiglu || RW == 2);
}

// kTrace: mv_kernel's traced instances (the workbench's variants_trace.cu); the backend's are false.
template <class A, int N, int RW, int U, int D = 0, bool kTrace = false>
void launch_mv(const PlanarView& v, const float* x, float* y, cudaStream_t s, bool allow_smem = !A::kGlobalX,
               const MvFuse& f = MvFuse{}) {
  const size_t smem = smem_of<A, N>(v.cols, f.norm_w != nullptr);
  if constexpr (A::kInt8X) {
    if (smem > kMaxSmem || !int8x_fits(v.cols)) throw Error("CUDA matvec: int8 x does not fit in shared memory");
    // x rounded once for the launch (MvFuse::preround_min): the same bytes in every block's xq.
    if (f.xq_buf && f.preround_min > 0 && !f.ids && f.cluster <= 1 && int64_t{N} * v.cols >= f.preround_min) {
      launch_preround<A::kPartElems, A::kQ8K>(x, N, v.cols, f.norm_w, f.eps, f.xq_buf, f.pdl, s);
      MvFuse g = f;
      g.stage_x = false;
      g.xq_global = f.xq_buf;
      // Shared memory: the int8 x alone (mv_kernel's xq_at), not the f32 copy and norm weights
      // of a norm prologue, which the pre-round did: at 4+ rows of 5120 columns those took
      // 135 KiB and left one block per SM (the 27B's 4-row verify, stop 40).
      launch_persistent<A, N, RW, U, true, D, kTrace>(v, x, y, xq_bytes(N, v.cols, false), s, g);
      return;
    }
    // x staged by cp.async (f.stage_x asked for): where the f32 copy beside the int8 x leaves
    // two blocks per SM (the norm prologue stages its copy anyway).
    const size_t staged = xq_bytes(N, v.cols, true);
    if (f.stage_x && !f.norm_w && staged <= kStageSmem) {
      launch_persistent<A, N, RW, U, true, D, kTrace>(v, x, y, staged, s, f);
      return;
    }
    MvFuse g = f;
    g.stage_x = false;
    launch_persistent<A, N, RW, U, true, D, kTrace>(v, x, y, smem, s, g);
  } else if (allow_smem && smem <= kMaxSmem)
    launch_persistent<A, N, RW, U, true, 0, kTrace>(v, x, y, smem, s, f);
  else
    launch_persistent<A, N, RW, U, false, 0, kTrace>(v, x, y, 0, s, f);
}

// Allows the shared-memory kernel its largest x copy (called once per Context).
template <class A, int N, int RW, int U, int D = 0, bool kTrace = false>
void prepare_mv() {
  cudaFuncSetAttribute(mv_kernel<A, N, RW, U, true, D, kTrace>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(kMaxSmem));
}

// The default (RW, U) per n (measured on the H200, docs in bench/cuda/README.md): two rows per
// warp for small n (the SwiGLU pair needs 2), two parts in flight per lane, one for the
// 3-word parts of Q6_K; the int8-x formats: their kDefaultU at n <= 2.
template <class A>
constexpr int default_u() {
  if constexpr (requires { A::kDefaultU; }) return A::kDefaultU;
  else return A::kLoads >= 3 ? 1 : 2;
}
template <class A, int N>
struct DefaultConfig {
  static constexpr int kRW = N <= 2 ? 2 : 1;
  static constexpr int kU = N > 2 ? 1 : default_u<A>();
};

// A family's pipelined configuration per n (mv_kernel's D > 0): depth kD (0: none), rows per
// warp kRW, parts per lane and step kU. Chosen by Context::pipe (MvFuse::pipe) at n = 1 and by
// Context::pipe and Context::pipe_rows (MvFuse::pipe_rows) at n = 2..8; the SwiGLU pair takes it
// at two rows per warp. A row's bits do not depend on it.
template <class A, int N>
struct NoPipe {
  static constexpr int kD = 0, kRW = 1, kU = 1;
  static constexpr bool kStage = false;  // x staged by cp.async (launch_mv, MvFuse::stage_x)
};

// Whether a configuration C = P<A, N> replaces the default loop: kOn where it says so (a
// D = 0 configuration of its own (RW, U)), else D > 0 or x staged.
template <class C>
constexpr bool pipe_on() {
  if constexpr (requires { C::kOn; }) return C::kOn;
  else return C::kD > 0 || C::kStage;
}
// The SwiGLU pair's launch under C (two rows per warp): kSw false, not in one launch (the
// caller runs gate and up, then the elementwise SwiGLU); its parts per lane kSwU and depth kSwD
// (default: kU, kD).
template <class C>
constexpr bool sw_on() {
  if constexpr (requires { C::kSw; }) return C::kSw;
  else return true;
}
template <class C>
constexpr int sw_u() {
  if constexpr (requires { C::kSwU; }) return C::kSwU;
  else return C::kU;
}
template <class C>
constexpr int sw_d() {
  if constexpr (requires { C::kSwD; }) return C::kSwD;
  else return C::kD;
}

// The deepest short pipe of an adapter: kShortMax where it says (the raw-block int8-x formats:
// by the registers of a part), else 4 for one word a part, 2 for more.
template <class A>
constexpr int short_max_of() {
  if constexpr (requires { A::kShortMax; }) return A::kShortMax;
  else return A::kLoads == 1 ? 4 : 2;
}

// Short rows at n = 1 (MvFuse::routed_pipe, short_pipe): the depth of the pipelined loop, or 0.
// Rows of at most 64 parts leave most lanes of the default loop's U parts idle (a routed down
// of 512 columns: 16 parts of Q4_K, one load per lane and round trip); pipelined, the loads of
// the block's next groups are in flight together. Formats of one 16-byte word a part take depth
// 4, the others (Q6_K) 2, the raw-block int8-x formats by short_max_of: the ring's registers
// without spills.
template <class A, int N>
int short_depth(const PlanarView& v, const MvFuse& f) {
  if constexpr (N != 1 || !A::kInt8X) {
    return 0;
  } else {
    const int d = f.ids ? f.routed_pipe : (v.cols / A::kPartElems <= 64 ? f.short_pipe : 0);
    return d <= 0 ? 0 : d >= 4 && short_max_of<A>() >= 4 ? 4 : 2;
  }
}

// Launches with the fusions of f; false (nothing launched) when this n cannot fuse them.
// x in shared memory: the formats that read it there, and the global-x (float) formats with a
// norm prologue when f.float_norm (x read from either place gives the same bits).
template <class A, int N, template <class, int> class P = NoPipe, bool kTrace = false>
bool launch_mv_fused(const PlanarView& v, const float* x, float* y, const MvFuse& f, cudaStream_t s) {
  constexpr int RW = DefaultConfig<A, N>::kRW, U = DefaultConfig<A, N>::kU;
  const bool smem_x = !A::kGlobalX || (f.norm_w && f.float_norm);
  if constexpr (N == 1 && A::kInt8X) {
    if (const int d = short_depth<A, N>(v, f); d > 0) {
      if (!can_fuse<A, N, 2>(v, f, smem_x)) return false;
      MvFuse g = f;
      g.stage_x = false;
      if constexpr (short_max_of<A>() >= 4) {
        if (d == 4) {
          launch_mv<A, N, 2, 1, 4, kTrace>(v, x, y, s, smem_x, g);
          return true;
        }
      }
      launch_mv<A, N, 2, 1, 2, kTrace>(v, x, y, s, smem_x, g);
      return true;
    }
  }
  if constexpr (pipe_on<P<A, N>>()) {
    using C = P<A, N>;
    // n = 1: Context::pipe; n = 2..8 (a verify's rows) also Context::pipe_rows.
    if (f.pipe && (N == 1 || f.pipe_rows)) {
      if (!can_fuse<A, N, 2>(v, f, smem_x)) return false;  // the SwiGLU pair at two rows per warp
      MvFuse g = f;
      g.stage_x = C::kStage || f.stage_x;  // the configuration's, or Context::set_stage_x
      if (f.swiglu) {
        if constexpr (!sw_on<C>()) return false;
        else launch_mv<A, N, 2, sw_u<C>(), sw_d<C>(), kTrace>(v, x, y, s, smem_x, g);
      } else {
        launch_mv<A, N, C::kRW, C::kU, C::kD, kTrace>(v, x, y, s, smem_x, g);
      }
      return true;
    }
  }
  if (!can_fuse<A, N, RW>(v, f, smem_x)) return false;
  launch_mv<A, N, RW, U, 0, kTrace>(v, x, y, s, smem_x, f);
  return true;
}

template <class A, template <class, int> class P = NoPipe>
bool launch_mv_default(const PlanarView& v, const float* x, float* y, int n, cudaStream_t s,
                       const MvFuse& f = MvFuse{}) {
  switch (n) {
    case 1: return launch_mv_fused<A, 1, P>(v, x, y, f, s);
    case 2: return launch_mv_fused<A, 2, P>(v, x, y, f, s);
    case 3: return launch_mv_fused<A, 3, P>(v, x, y, f, s);
    case 4: return launch_mv_fused<A, 4, P>(v, x, y, f, s);
    case 5: return launch_mv_fused<A, 5, P>(v, x, y, f, s);
    case 6: return launch_mv_fused<A, 6, P>(v, x, y, f, s);
    case 7: return launch_mv_fused<A, 7, P>(v, x, y, f, s);
    default: return launch_mv_fused<A, 8, P>(v, x, y, f, s);
  }
}

template <class A, int N, template <class, int> class P, bool kTrace = false>
void prepare_mv_n() {
  prepare_mv<A, N, DefaultConfig<A, N>::kRW, DefaultConfig<A, N>::kU, 0, kTrace>();
  if constexpr (N == 1 && A::kInt8X) {  // short rows (short_depth)
    prepare_mv<A, N, 2, 1, 2, kTrace>();
    if constexpr (short_max_of<A>() >= 4) prepare_mv<A, N, 2, 1, 4, kTrace>();
  }
  if constexpr (pipe_on<P<A, N>>()) {
    using C = P<A, N>;
    prepare_mv<A, N, C::kRW, C::kU, C::kD, kTrace>();
    if constexpr (sw_on<C>() && (C::kRW != 2 || sw_u<C>() != C::kU || sw_d<C>() != C::kD))
      prepare_mv<A, N, 2, sw_u<C>(), sw_d<C>(), kTrace>();  // the SwiGLU pair
  }
}

template <class A, template <class, int> class P = NoPipe>
void prepare_mv_default() {
  prepare_mv_n<A, 1, P>();
  prepare_mv_n<A, 2, P>();
  prepare_mv_n<A, 3, P>();
  prepare_mv_n<A, 4, P>();
  prepare_mv_n<A, 5, P>();
  prepare_mv_n<A, 6, P>();
  prepare_mv_n<A, 7, P>();
  prepare_mv_n<A, 8, P>();
}

template <class... As>
struct AdapterList {};

}  // namespace df::cudamv
