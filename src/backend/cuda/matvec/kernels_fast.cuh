// The matvec kernel (every format): a persistent grid of 8-warp blocks. Each block copies
// x [n, cols] once into shared memory, padded by 4 floats per 32 elements so that the lanes'
// float4 reads of their parts hit distinct banks (a lane's part is 16..256 contiguous bytes
// of x, and unpadded or straight from L1 the 32 lanes of a warp would read 32 different
// 128-byte lines: that cost 4-8x the kernel's time in the first version). Then each warp
// takes RW output rows at a time; lane l takes the parts t = l, l + 32, ... of its rows in
// order, U parts at a time, with the 16-byte weight loads of the U parts issued before the
// first is used (the first chunk's loads are issued before the x copy, to overlap it).
// A row's arithmetic is that of a single row in the same order for every N, RW, U and for
// both x paths (shared or global): results are bit-identical for every n.
#pragma once
#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/matvec/kernels_raw.cuh"
#include "backend/cuda/matvec/mv_fuse.cuh"
#include "backend/cuda/matvec/xq.cuh"

namespace df::cudamv {

constexpr int kWarps = 8;  // warps per block

// Warps per output row of a launch: rows (SwiGLU pairs count twice) spread over at least
// ~8448 warp-rows (two blocks of 16 rows per SM for two waves on the H200's 132 SMs),
// at most 8, and no more than leave every thread a part. A function of the matrices alone
// (never of n): a row's summation order, and so its bits, are the same for every n.
__host__ __device__ inline int mv_wpr(int64_t row_units, int64_t nparts) {
  int w = 1;
  while (w < kWarps && row_units * w < 8448 && nparts >= 64 * w) w *= 2;
  return w;
}

// x row stride in shared memory (floats): 4 floats of padding per 32 elements.
__host__ __device__ constexpr int64_t xs_stride(int64_t cols) { return cols + 4 * ((cols + 31) / 32); }
__device__ __forceinline__ int xs_off(int e) { return e + 4 * (e >> 5); }

// The sum of 16 consecutive x values, in the one order both x paths use.
__device__ __forceinline__ float sum16_of(const float4& a, const float4& b, const float4& c, const float4& d) {
  float s = a.x;
  s += a.y, s += a.z, s += a.w, s += b.x, s += b.y, s += b.z, s += b.w;
  s += c.x, s += c.y, s += c.z, s += c.w, s += d.x, s += d.y, s += d.z, s += d.w;
  return s;
}

// x accessors: (j, i) -> float4 of x row j at element i of the part (i % 4 == 0);
// sum16(j, i): sum of x row j over part elements i .. i + 15 (i % 16 == 0, parts of kSums
// formats start at multiples of 32).
struct XShared {
  const float* p;  // element 0 of the part, row 0
  const float* sums;  // the part's first 16-element sum, row 0 (kSums formats)
  int stride, sum_stride;
  __device__ float4 operator()(int j, int i) const {
    return *reinterpret_cast<const float4*>(p + j * stride + i + 4 * (i >> 5));
  }
  __device__ float sum16(int j, int i) const { return sums[j * sum_stride + i / 16]; }
};
struct XGlobal {
  const float* p;
  int64_t cols;
  __device__ float4 operator()(int j, int i) const { return __ldg(reinterpret_cast<const float4*>(p + j * cols + i)); }
  __device__ float sum16(int j, int i) const {
    return sum16_of((*this)(j, i), (*this)(j, i + 4), (*this)(j, i + 8), (*this)(j, i + 12));
  }
};

// Shared memory of the x copy: N rows of xs_stride floats, then (kSums) N rows of cols / 16 sums.
__host__ __device__ constexpr size_t xs_bytes(int n, int64_t cols, bool sums) {
  return static_cast<size_t>(n) * static_cast<size_t>(xs_stride(cols) + (sums ? cols / 16 : 0)) * sizeof(float);
}

// Whether a format multiplies int8-rounded x (dev_dp4a.cuh: x staged by quantize_x).
template <class F>
constexpr bool int8x_of() {
  if constexpr (requires { F::kInt8X; }) return F::kInt8X;
  else return false;
}

template <class F>
constexpr bool q8k_of() {
  if constexpr (requires { F::kQ8K; }) return F::kQ8K;
  else return false;
}

// Parts in flight per lane of the default configuration at n <= 2 (launch.cuh DefaultConfig).
template <class F>
constexpr int default_u_of() {
  if constexpr (requires { F::kDefaultU; }) return F::kDefaultU;
  else return F::kLoads >= 3 ? 1 : 2;
}

// Shared memory of the int8 x (xq.cuh) of N rows, after (norm prologue) the f32 copy that the
// norm reads.
__host__ __device__ constexpr size_t xq_bytes(int n, int64_t cols, bool norm) {
  return static_cast<size_t>(n) * static_cast<size_t>((norm ? 4 * xs_stride(cols) : 0) + xq_row_bytes(cols));
}
// ... and (norm prologue) the norm weights [cols] f32 after them (int8x_prologue's wsm).
__host__ __device__ constexpr size_t xqw_bytes(int n, int64_t cols, bool norm) {
  return xq_bytes(n, cols, norm) + (norm ? 4 * static_cast<size_t>(cols) : 0);
}

// x rows [N, cols] copied into shared memory (rows of `stride` floats, padded as xs_off) by
// cp.async: every thread issues all of its 16-byte copies before waiting for any, so the
// copy takes one L2 round trip whatever cols is (a loop of loads and stores takes one per
// step). Ends with the block synchronised.
template <int N>
__device__ __forceinline__ void stage_x(float* xs, const float* __restrict__ x, int cols, int stride) {
  const int total4 = N * cols / 4;
  for (int i = threadIdx.x; i < total4; i += blockDim.x) {
    const int e = 4 * i, j = e / cols, c = e - j * cols;
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(xs + j * stride + xs_off(c)));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(x + e) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
}

// This block's rank in its thread block cluster (MvFuse::cluster, launch_persistent; 0 without
// a cluster launch).
__device__ __forceinline__ int cluster_rank() {
  unsigned r;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return static_cast<int>(r);
}
// The cluster barrier in two halves: arrive (relaxed: orders nothing; release: this thread's
// shared-memory writes, local and remote, before the others' acquire) and wait (acquire).
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// quantize_x's store into the xq of every block of the cluster (distributed shared memory):
// each block rounds its xq_range of x and writes it to all, so every block ends with all of x.
struct XqCluster {
  uint32_t base;  // xq's shared-memory address in this block (the same offset in every block)
  int count;
  __device__ void operator()(int off, uint32_t a, uint32_t b) const {
    for (int r = 0; r < count; ++r) {
      uint32_t dst;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dst) : "r"(base + off), "r"(r));
      asm volatile("st.shared::cluster.v2.u32 [%0], {%1, %2};" ::"r"(dst), "r"(a), "r"(b) : "memory");
    }
  }
};

// The norm weights [cols] copied into shared memory by cp.async (issued, not waited for: the
// next stage_x's wait completes them). Weights, so before griddepcontrol.wait.
__device__ __forceinline__ void stage_norm_w(float* wsm, const float* __restrict__ w, int cols) {
  const bool a16 = (reinterpret_cast<uintptr_t>(w) & 15) == 0;
  for (int i = threadIdx.x; i < (a16 ? cols / 4 : cols); i += blockDim.x) {
    if (a16) {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(wsm + 4 * i));
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(w + 4 * i) : "memory");
    } else {
      const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(wsm + i));
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(w + i) : "memory");
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// The int8-x kernels' prologue (every thread of the block): x rows [N, cols] rounded into xq
// (xq.cuh), normed first when f.norm_w (the f32 copy in xs, rows of `stride` floats: the order
// of rms_norm_rows, the same bits as unfused; the norm weights in wsm, staged by stage_norm_w
// before the wait), from a staged copy when f.stage_x, else straight from global memory.
// In a cluster launch (f.cluster > 1) each block rounds its xq_range of x and stores it into
// every block's xq (XqCluster), then the cluster synchronises: the same bytes, each rounded
// once per cluster instead of once per block. Ends with the block synchronised.
template <class A, int N>
__device__ __forceinline__ void int8x_prologue(float* xs, uint8_t* xq, const float* wsm, const float* __restrict__ x,
                                               int cols, int stride, const MvFuse& f) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto quantize = [&](const auto& src) {
    if (f.cluster > 1) {
      int i0, i1;
      xq_range(N, cols, cluster_rank(), f.cluster, i0, i1);
      const XqCluster st{static_cast<uint32_t>(__cvta_generic_to_shared(xq)), f.cluster};
      quantize_x_range<A::kPartElems, A::kQ8K>(src, N, cols, i0, i1, st);
      cluster_arrive_release();
      cluster_wait();
    } else {
      quantize_x<A::kPartElems, A::kQ8K>(src, N, cols, xq);
    }
  };
  if (f.norm_w) {  // the f32 copy, its rows' RMS scales, then the normed rows rounded
    stage_x<N>(xs, x, cols, stride);
    __shared__ float row_scale8[N];
    if (warp < N) {  // the order of rms_norm_rows (mv_fuse.cuh): the same bits as unfused
      const float* xr = xs + warp * stride;
      const float sc = rms_scale_of(cols, f.eps, [&](int c) { return xr[xs_off(c)]; });
      if (lane == 0) row_scale8[warp] = sc;
    }
    __syncthreads();
    quantize([&](int j, int c) {
      const float4 a = *reinterpret_cast<const float4*>(xs + j * stride + xs_off(c));
      const float4 w = *reinterpret_cast<const float4*>(wsm + c);
      const float sc = row_scale8[j];
      return make_float4(rms_apply(a.x, sc, w.x), rms_apply(a.y, sc, w.y), rms_apply(a.z, sc, w.z),
                         rms_apply(a.w, sc, w.w));
    });
  } else if (f.stage_x) {  // the same values, from the staged copy
    stage_x<N>(xs, x, cols, stride);
    quantize([&](int j, int c) { return *reinterpret_cast<const float4*>(xs + j * stride + xs_off(c)); });
  } else {
    quantize([&](int j, int c) {
      return __ldg(reinterpret_cast<const float4*>(x + static_cast<int64_t>(j) * cols + c));
    });
  }
  __syncthreads();
}

// x rounded once for a launch (MvFuse::xq_buf, launch_mv): block b of the grid rounds its
// xq_range of x rows [n, cols] into out (xq.cuh's layout for part size P, row j at
// j * xq_row_bytes(cols)), normed first when norm_w (each row's scale summed by one warp in
// rms_scale_of's order, then rms_apply: int8x_prologue's arithmetic on the same values, so
// the same bytes). Launched before the matvec (PDL: it waits for the previous kernel, then
// lets the matvec launch and load its weights). blockDim.x == 256, n <= kMaxRows.
template <int P, bool kQ8K>
__global__ void __launch_bounds__(256) xq_preround_kernel(const float* __restrict__ x, int n, int cols,
                                                         const float* __restrict__ norm_w, float eps, uint8_t* out) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  int i0, i1;
  xq_range(n, cols, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), i0, i1);
  if (i0 >= i1) return;
  auto raw = [&](int j, int c) { return __ldg(reinterpret_cast<const float4*>(x + static_cast<int64_t>(j) * cols + c)); };
  if (!norm_w) {
    quantize_x_range<P, kQ8K>(raw, n, cols, i0, i1, XqLocal{out});
    return;
  }
  __shared__ float row_scale[8];  // kMaxRows (matvec.cuh)
  const int warp = static_cast<int>(threadIdx.x >> 5);
  const int j0 = 8 * i0 / cols, j1 = (8 * i1 - 1) / cols;  // the rows of this block's units
  if (warp >= j0 && warp <= j1) {
    const float* xr = x + static_cast<int64_t>(warp) * cols;
    const float sc = rms_scale_of(cols, eps, [&](int c) { return __ldg(xr + c); });
    if ((threadIdx.x & 31) == 0) row_scale[warp] = sc;
  }
  __syncthreads();
  quantize_x_range<P, kQ8K>(
      [&](int j, int c) {
        const float4 a = raw(j, c);
        const float sc = row_scale[j];
        return make_float4(rms_apply(a.x, sc, __ldg(norm_w + c)), rms_apply(a.y, sc, __ldg(norm_w + c + 1)),
                           rms_apply(a.z, sc, __ldg(norm_w + c + 2)), rms_apply(a.w, sc, __ldg(norm_w + c + 3)));
      },
      n, cols, i0, i1, XqLocal{out});
}

// The int8 x of a launch rounded by xq_preround_kernel (MvFuse::xq_global): `bytes` (a multiple
// of 16) copied into xq by cp.async, one round trip. Ends with the block synchronised.
__device__ __forceinline__ void copy_xq(uint8_t* xq, const uint8_t* __restrict__ src, int bytes) {
  for (int i = 16 * static_cast<int>(threadIdx.x); i < bytes; i += 16 * static_cast<int>(blockDim.x)) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(xq + i));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src + i) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
}

// A planar format of dev_fast.cuh (or dev_dp4a.cuh): its 16-byte words and meta are loaded ahead.
template <class F>
struct PlanarAdapter {
  using Format = F;
  static constexpr GgmlType kType = F::kType;
  static constexpr int kPartElems = F::kPartElems, kLoads = F::kLoads;
  static constexpr bool kSums = F::kSums, kGlobalX = F::kGlobalX, kInt8X = int8x_of<F>(), kQ8K = q8k_of<F>();
  static constexpr int kDefaultU = default_u_of<F>();
  struct Regs {
    uint4 q[F::kLoads];
    typename F::Meta m;
  };
  __device__ static void load(const PlanarView&, const uint8_t* qr, const uint8_t* mr, int t, int nparts, Regs& r) {
#pragma unroll
    for (int i = 0; i < F::kLoads; ++i)
      r.q[i] = ld_stream(reinterpret_cast<const uint4*>(qr + (static_cast<int64_t>(i) * nparts + t) * 16));
    r.m = F::load_meta(mr, t, nparts / F::kPartsPerBlock);
  }
  template <int N, class X>
  __device__ static void dot(const PlanarView&, const Regs& r, const X& xa, float (&acc)[N]) {
    F::template dot<N>(r.q, r.m, xa, acc);
  }
};

// A raw-block format of dev_raw_*.cuh: dequantized exactly, then multiplied (its loads are
// issued inside dot).
template <class R>
struct RawAdapter {
  static constexpr GgmlType kType = R::kType;
  static constexpr int kPartElems = R::kPartElems, kLoads = 1;
  static constexpr bool kSums = false, kGlobalX = false, kInt8X = false, kQ8K = false;
  struct Regs {
    const uint8_t* b;
    int p;
  };
  __device__ static void load(const PlanarView&, const uint8_t* qr, const uint8_t*, int t, int, Regs& r) {
    r.b = qr + static_cast<int64_t>(t / R::kParts) * R::kBlockBytes;
    r.p = t % R::kParts;
  }
  template <int N, class X>
  __device__ static void dot(const PlanarView& v, const Regs& r, const X& xa, float (&acc)[N]) {
    float w[R::kPartElems];
    R::dequant(r.b, r.p, v.tables, w);
#pragma unroll
    for (int j = 0; j < N; ++j)
#pragma unroll
      for (int i = 0; i < R::kPartElems; i += 4) {
        const float4 xv = xa(j, i);
        acc[j] = fmaf(w[i], xv.x, acc[j]);
        acc[j] = fmaf(w[i + 1], xv.y, acc[j]);
        acc[j] = fmaf(w[i + 2], xv.z, acc[j]);
        acc[j] = fmaf(w[i + 3], xv.w, acc[j]);
      }
  }
};

// D (pipeline depth): 0, the loop above (a chunk's loads, then its products, then the next
// chunk's loads); D > 0, the block's (group, chunk) steps in one sequence whose loads run D
// steps ahead in a ring of D register sets: the loads of steps s + 1 .. s + D - 1 (the first D
// issued before griddepcontrol.wait and the x prologue) are in flight while step s is
// computed, across the ends of row groups. The arithmetic of a row is the same for every D
// (which lane takes which parts, in which order, is unchanged): the same bits.
// kTrace (the workbench's traced instances only, variants_trace.cu): the phase stamps of
// mv_trace (mv_fuse.cuh) into f.trace; the backend's instances have none of that code.
template <class A, int N, int RW, int U, bool kSmem, int D = 0, bool kTrace = false>
__global__ void __launch_bounds__(kWarps * 32, 2)  // >= 16 warps per SM: Q6_K would take 153 registers
    mv_kernel(PlanarView v, const float* __restrict__ x, float* __restrict__ y, MvFuse f, int wpr) {
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  if constexpr (kTrace) mv_trace(f.trace, 3, 0);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // wpr warps share each row (split over the row's parts, for matrices of few rows): thread
  // rl of the row's 32 * wpr takes parts rl, rl + rs, ...; the warps' sums are then added in
  // warp order. wpr depends on the launch's matrices only (mv_wpr), never on n.
  const int sub = warp % wpr, wg = warp / wpr, row_warps = kWarps / wpr;
  const int rl = sub * 32 + lane, rs = 32 * wpr;
  const int nparts = static_cast<int>(v.cols / A::kPartElems);
  const int stride = static_cast<int>(xs_stride(v.cols));
  // Matrices of this launch (mv_fuse.cuh): group g < g0 is matrix 0's, then matrix 1's, 2's.
  // A SwiGLU pair (RW == 2) gives each warp row `row` of matrix 0 and of matrix 1.
  const bool pair = RW == 2 && f.swiglu;
  const int64_t per_group = pair ? row_warps : row_warps * RW;
  const int64_t g0 = (v.rows + per_group - 1) / per_group;
  const int64_t g1 = pair || f.nmat < 2 ? 0 : (f.rows[0] + per_group - 1) / per_group;
  const int64_t g2 = pair || f.nmat < 3 ? 0 : (f.rows[1] + per_group - 1) / per_group;
  const int64_t ngroups = g0 + g1 + g2;

  // Routed experts: this grid row's slot picks its expert's planes, x row and y row.
  const uint8_t* fq0 = f.q[0];
  const uint8_t* fm0 = f.m[0];
  if (f.ids) {
    // The ids are the previous kernel's output: under PDL (MvFuse::routed_pdl) wait for it
    // first, so this launch's weight loads come after the wait (a no-op without the attribute).
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const int s = static_cast<int>(blockIdx.y);
    int e = f.ids[s];
    if (e < 0) return;  // an unused slot (padding of a grouped prefill launch): the whole block
    if (e >= f.n_expert && f.xq[0]) {  // the expert outside the tables (MvFuse::xq)
      v.q = f.xq[0], v.m = f.xm[0];
      if (f.nmat > 1) fq0 = f.xq[1], fm0 = f.xm[1];
    } else {
      e = e < f.n_expert ? e : f.n_expert - 1;
      v.q = f.table[0][e], v.m = f.table[0][f.n_expert + e];
      if (f.nmat > 1) fq0 = f.table[1][e], fm0 = f.table[1][f.n_expert + e];
    }
    x += static_cast<int64_t>(s / f.x_div) * N * v.cols;  // N rows per slot (x_div 1 when N > 1)
    y += static_cast<int64_t>(s) * N * v.rows;
  }
  const uint8_t* qr[RW];
  const uint8_t* mr[RW];
  int mat = 0;        // the matrix of the current group
  int64_t lg = 0;     // the group within it
  // Per-matrix fields by constant index only (a run-time index into the kernel parameters
  // copies them to local memory: measured ~10 % slower on short rows).
  auto rows_of = [&](int m) { return m == 0 ? v.rows : m == 1 ? f.rows[0] : f.rows[1]; };
  auto q_of = [&](int m) { return m == 0 ? v.q : m == 1 ? fq0 : f.q[1]; };
  auto m_of = [&](int m) { return m == 0 ? v.m : m == 1 ? fm0 : f.m[1]; };
  auto group_of = [&](int64_t g, int& gm, int64_t& glg) {
    gm = g < g0 ? 0 : g < g0 + g1 ? 1 : 2;
    glg = gm == 0 ? g : gm == 1 ? g - g0 : g - g0 - g1;
  };
  auto set_rows = [&](int64_t g) {
    group_of(g, mat, lg);
    const int64_t rows = rows_of(mat);
    const uint8_t* qb = q_of(mat);
    const uint8_t* mb = m_of(mat);
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      if (pair) {
        int64_t row = lg * row_warps + wg;
        row = row < v.rows ? row : v.rows - 1;  // clamped: loads stay valid, the write is skipped
        qr[r] = (r == 0 ? v.q : fq0) + row * v.q_row_bytes;
        mr[r] = (r == 0 ? v.m : fm0) + row * v.m_row_bytes;
      } else {
        int64_t row = (lg * row_warps + wg) * RW + r;
        row = row < rows ? row : rows - 1;
        qr[r] = qb + row * v.q_row_bytes;
        mr[r] = mb + row * v.m_row_bytes;
      }
    }
  };
  using Regs = typename A::Regs;
  auto load_into = [&](int t0, Regs (&dst)[U][RW]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + rs * u + rl;
      if (t < nparts)
#pragma unroll
        for (int r = 0; r < RW; ++r) A::load(v, qr[r], mr[r], t, nparts, dst[u][r]);
    }
  };
  constexpr int kRing = D > 0 ? D : 1;
  Regs ring[kRing][U][RW];
  auto& regs = ring[0];
  auto load_chunk = [&](int t0) { load_into(t0, regs); };
  // D > 0: the load cursor (group ld_g, chunk ld_c) of the next step to load.
  const int nchunks = (nparts + rs * U - 1) / (rs * U);
  int64_t ld_g = blockIdx.x;
  int ld_c = 0;
  auto load_next = [&](Regs (&dst)[U][RW]) {
    if (ld_g >= ngroups) return;
    if (ld_c == 0) set_rows(ld_g);
    load_into(ld_c * rs * U, dst);
    if (++ld_c == nchunks) ld_c = 0, ld_g += gridDim.x;
  };

  int64_t g = blockIdx.x;
  if constexpr (D > 0) {
#pragma unroll
    for (int d = 0; d < D; ++d) load_next(ring[d]);
  } else if (g < ngroups) {
    set_rows(g);
    load_chunk(0);
  }
  // L2 prefetch (MvFuse::l2_block_bytes): the quant and meta bytes of the block's first row
  // groups (g = blockIdx.x + i gridDim.x; a group's rows are contiguous in each plane), one
  // group per thread, as many as the block's share of the launch's bound holds. Weights only,
  // so before griddepcontrol.wait: under PDL it runs while the previous kernel does.
  if (f.l2_block_bytes > 0 && !f.ids) {
    const int64_t grows = pair ? row_warps : row_warps * RW;  // rows of a group, per matrix
    const int64_t gbytes = grows * static_cast<int64_t>(v.q_row_bytes + v.m_row_bytes) * (pair ? 2 : 1);
    const int64_t mine = g < ngroups ? (ngroups - 1 - g) / gridDim.x + 1 : 0;
    const int64_t take = mine < f.l2_block_bytes / gbytes ? mine : f.l2_block_bytes / gbytes;
    for (int64_t i = threadIdx.x; i < take; i += blockDim.x) {
      int gm;
      int64_t glg;
      group_of(g + i * gridDim.x, gm, glg);
      const int64_t r0 = glg * grows, rows = rows_of(gm);
      const int64_t nr = rows - r0 < grows ? rows - r0 : grows;
      l2_prefetch(q_of(gm) + r0 * v.q_row_bytes, nr * static_cast<int64_t>(v.q_row_bytes));
      l2_prefetch(m_of(gm) + r0 * v.m_row_bytes, nr * static_cast<int64_t>(v.m_row_bytes));
      if (pair) {
        l2_prefetch(fq0 + r0 * v.q_row_bytes, nr * static_cast<int64_t>(v.q_row_bytes));
        l2_prefetch(fm0 + r0 * v.m_row_bytes, nr * static_cast<int64_t>(v.m_row_bytes));
      }
    }
  }
  // int8 x: the norm weights into shared memory (after the int8 x, xqw_bytes), and (cluster
  // launch) the first half of the barrier that lets the cluster's blocks write into each
  // other's shared memory (every block of the cluster has started).
  const int xq_rb = static_cast<int>(xq_row_bytes(v.cols));
  // (x rounded once for the launch, f.xq_global: no f32 copy, the int8 x alone; launch_mv)
  auto xq_at = [&] {
    return reinterpret_cast<uint8_t*>(smem4) + ((f.norm_w || f.stage_x) && !f.xq_global ? 4 * N * stride : 0);
  };
  if constexpr (kSmem && A::kInt8X) {
    if (f.norm_w && !f.xq_global) stage_norm_w(reinterpret_cast<float*>(xq_at() + N * xq_rb), f.norm_w, static_cast<int>(v.cols));
    if (f.cluster > 1) cluster_arrive_relaxed();
  }
  // Programmatic dependent launch (launch_persistent, MvFuse::pdl): the weight loads above may
  // run before the previous kernel has finished; x and y only after it. Then the next
  // kernel may launch (its blocks take the SMs this grid leaves, and load their weights).
  // Both are no-ops in a launch without the attribute.
  if constexpr (kTrace) mv_trace(f.trace, 4, -1);
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  if constexpr (kTrace) mv_trace(f.trace, 5, 1);
  float* sums = xs + N * stride;
  const int sum_stride = static_cast<int>(v.cols / 16);
  // kInt8X: the int8 x after the f32 copy (norm prologue, or x staged by cp.async: f.stage_x)
  uint8_t* xq = xq_at();
  if constexpr (kSmem && A::kInt8X) {
    if (f.cluster > 1) cluster_wait();  // every block of the cluster has started
    if (f.xq_global) copy_xq(xq, f.xq_global, N * xq_rb);  // rounded once for the launch
    else int8x_prologue<A, N>(xs, xq, reinterpret_cast<const float*>(xq + N * xq_rb), x, static_cast<int>(v.cols), stride, f);
  } else if constexpr (kSmem) {
    const int cols = static_cast<int>(v.cols);
    if (f.norm_w) {  // x rows RMS-normed (times norm_w) in shared memory, then their sums
      const int total4 = N * cols / 4;
      for (int i = threadIdx.x; i < total4; i += blockDim.x) {
        const int e = 4 * i, j = e / cols, c = e - j * cols;
        *reinterpret_cast<float4*>(xs + j * stride + xs_off(c)) = __ldg(reinterpret_cast<const float4*>(x) + i);
      }
      __syncthreads();
      __shared__ float row_scale[N];
      if (warp < N) {  // the order of rms_norm_rows (mv_fuse.cuh): the same bits as unfused
        const float* xr = xs + warp * stride;
        const float sc = rms_scale_of(cols, f.eps, [&](int c) { return xr[xs_off(c)]; });
        if (lane == 0) row_scale[warp] = sc;
      }
      __syncthreads();
      for (int e = threadIdx.x; e < N * cols; e += blockDim.x) {
        const int j = e / cols, c = e - j * cols;
        float& xe = xs[j * stride + xs_off(c)];
        xe = rms_apply(xe, row_scale[j], f.norm_w[c]);
      }
      if constexpr (A::kSums) {
        __syncthreads();
        const int total16 = N * cols / 16;
        for (int i = threadIdx.x; i < total16; i += blockDim.x) {
          const int e = 16 * i, j = e / cols, c = e - j * cols;
          const float4* src = reinterpret_cast<const float4*>(xs + j * stride + xs_off(c));
          sums[j * sum_stride + c / 16] = sum16_of(src[0], src[1], src[2], src[3]);
        }
      }
    } else if constexpr (A::kSums) {  // 16 floats per thread and step, with their sum
      const int total16 = N * cols / 16;
      for (int i = threadIdx.x; i < total16; i += blockDim.x) {
        const int e = 16 * i, j = e / cols, c = e - j * cols;
        const float4* src = reinterpret_cast<const float4*>(x) + 4 * i;
        const float4 a = __ldg(src), b = __ldg(src + 1), cc = __ldg(src + 2), d = __ldg(src + 3);
        float4* dst = reinterpret_cast<float4*>(xs + j * stride + xs_off(c));
        dst[0] = a, dst[1] = b, dst[2] = cc, dst[3] = d;
        sums[j * sum_stride + c / 16] = sum16_of(a, b, cc, d);
      }
    } else {
      const int total4 = N * cols / 4;
      for (int i = threadIdx.x; i < total4; i += blockDim.x) {
        const int e = 4 * i, j = e / cols, c = e - j * cols;
        *reinterpret_cast<float4*>(xs + j * stride + xs_off(c)) = __ldg(reinterpret_cast<const float4*>(x) + i);
      }
    }
    __syncthreads();
  }
  if constexpr (kTrace) mv_trace(f.trace, 6, -1);
  // The products of one chunk (parts t0 + rs u + rl) with the registers rg.
  auto compute = [&](int t0, const Regs (&rg)[U][RW], float (&acc)[RW][N]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + rs * u + rl;
      if (t < nparts) {
        const int e0 = t * A::kPartElems;
        if constexpr (A::kInt8X) {
          static_assert(kSmem, "int8 x lives in shared memory");
          const XQ xa{xq + t * 16, xq + v.cols + (e0 / 32) * 8, xq_rb, nparts * 16};
#pragma unroll
          for (int r = 0; r < RW; ++r) A::template dot<N>(v, rg[u][r], xa, acc[r]);
        } else if constexpr (kSmem) {
          const XShared xa{xs + xs_off(e0), sums + e0 / 16, stride, sum_stride};
#pragma unroll
          for (int r = 0; r < RW; ++r) A::template dot<N>(v, rg[u][r], xa, acc[r]);
        } else {
          const XGlobal xa{x + e0, v.cols};
#pragma unroll
          for (int r = 0; r < RW; ++r) A::template dot<N>(v, rg[u][r], xa, acc[r]);
        }
      }
    }
  };
  // The end of group gg (matrix gmat, group glg within it): the rows' sums and stores.
  auto finish = [&](int gmat, int64_t glg, const float (&acc)[RW][N]) {
    float res[RW][N];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int j = 0; j < N; ++j) res[r][j] = warp_sum(acc[r][j]);
    if (wpr > 1) {  // the row's warps' sums, added in warp order by its first warp
      __shared__ float red[kWarps][RW * N];
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
          for (int j = 0; j < N; ++j) red[warp][r * N + j] = res[r][j];
      __syncthreads();
      if (sub == 0 && lane == 0)
        for (int w = 1; w < wpr; ++w)
#pragma unroll
          for (int r = 0; r < RW; ++r)
#pragma unroll
            for (int j = 0; j < N; ++j) res[r][j] += red[warp + w][r * N + j];
      __syncthreads();
    }
    if (lane == 0 && sub == 0) {
      if (pair) {
        const int64_t row = glg * row_warps + wg;
        if (row < v.rows)
#pragma unroll
          for (int j = 0; j < N; ++j) y[j * v.rows + row] = swiglu_of(res[0][j], res[RW - 1][j]);
      } else {
        const int64_t rows = rows_of(gmat);
        float* ym = gmat == 0 ? y : gmat == 1 ? f.y[0] : f.y[1];
        const MvEpi ep = gmat == 0 ? f.epi[0] : gmat == 1 ? f.epi[1] : f.epi[2];
#pragma unroll
        for (int r = 0; r < RW; ++r) {
          const int64_t row = (glg * row_warps + wg) * RW + r;
          if (row < rows)
#pragma unroll
            for (int j = 0; j < N; ++j) {
              store_out(ep, res[r][j], ym + j * rows + row, row);
            }
        }
      }
    }
  };
  if constexpr (D > 0) {
    // The block's steps: its groups g = blockIdx.x + i gridDim.x in order, nchunks each.
    const int64_t my_groups = g < ngroups ? (ngroups - 1 - g) / gridDim.x + 1 : 0;
    const int64_t steps = my_groups * nchunks;
    int c = 0;  // the chunk of the step being computed, in group g
    float acc[RW][N];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
      for (int j = 0; j < N; ++j) acc[r][j] = 0.0f;
    for (int64_t s0 = 0; s0 < steps; s0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        if (s0 + d < steps) {  // uniform over the block (finish may synchronise it)
          compute(c * rs * U, ring[d], acc);
          load_next(ring[d]);  // step s0 + d + D
          if (++c == nchunks) {
            int gm;
            int64_t glg;
            group_of(g, gm, glg);
            finish(gm, glg, acc);
#pragma unroll
            for (int r = 0; r < RW; ++r)
#pragma unroll
              for (int j = 0; j < N; ++j) acc[r][j] = 0.0f;
            c = 0;
            g += gridDim.x;
          }
        }
      }
    }
  } else {
    bool first = true;
    for (; g < ngroups; g += gridDim.x) {
      if (!first) set_rows(g);
      float acc[RW][N];
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int j = 0; j < N; ++j) acc[r][j] = 0.0f;
      for (int t0 = 0; t0 < nparts; t0 += rs * U) {
        if (!first) load_chunk(t0);
        first = false;
        compute(t0, regs, acc);
      }
      finish(mat, lg, acc);
    }
  }
  if constexpr (kTrace) {  // the block's last store done (every thread gets here)
    __syncthreads();
    mv_trace(f.trace, 7, 2);
  }
}

}  // namespace df::cudamv
