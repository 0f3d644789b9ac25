// Internal: the tensor-core GEMM kernel of gemm.cuh, templated on a weight "source" (how
// one part of a weight row is loaded and dequantized: the matvec/ format structs) and on the
// block tile. A block of 8 warps (2 along x rows, 4 along weight rows) computes a BM x BN
// tile of y; each warp (BM/2) x (BN/4) with m16n8k16 mma.sync (f16 in, f32 accumulate).
// Shared memory: two stages of the x tile [BM][72] and the weight tile [BN][72] halfs (rows
// padded by 16 bytes: ldmatrix rows hit distinct banks).
// Tile codes (gemm_variant): 1 = 128x128, 2 = 64x128, 3 = 128x64, 4 = 64x64 (BM x BN); plus 16 S
// (S >= 2): split-K, the k steps in S ranges (gridDim.z), range z's partial sums written to
// y + z n ys (the caller sums the S partials in z order: gemm.cu split_sum).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/gemm/gemm.cuh"
#include "common/error.h"
#include "quant/types.h"

namespace df::cuda::gemm {

using cudamv::DevTables;
using cudamv::PlanarView;

constexpr int kBK = static_cast<int>(kColsStep), kThreads = 256, kLds = kBK + 8;

template <int BM, int BN>
constexpr size_t smem_bytes() {
  return 2 * static_cast<size_t>(BM + BN) * kLds * sizeof(__half);
}

// A planar format of dev_fast.cuh (F32, F16, BF16, Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_XS).
template <class F>
struct PlanarSource {
  static constexpr GgmlType kType = F::kType;
  static constexpr int kPE = F::kPartElems;
  struct Regs {
    uint4 q[F::kLoads];
    typename F::Meta m;
  };
  __device__ static void load(const PlanarView& v, int64_t row, int t, Regs& r) {
    const int nparts = static_cast<int>(v.cols / kPE);
    const uint8_t* qr = v.q + row * static_cast<int64_t>(v.q_row_bytes);
#pragma unroll
    for (int i = 0; i < F::kLoads; ++i)
      r.q[i] = __ldg(reinterpret_cast<const uint4*>(qr + (static_cast<int64_t>(i) * nparts + t) * 16));
    r.m = F::load_meta(v.m + row * static_cast<int64_t>(v.m_row_bytes), t, nparts / F::kPartsPerBlock);
  }
  __device__ static void dequant(const PlanarView&, const Regs& r, float (&w)[kPE]) { F::dequant(r.q, r.m, w); }
};

// A raw-block format of dev_raw_basic.cuh / dev_raw_iq.cuh (the block is read at dequant).
template <class R>
struct RawSource {
  static constexpr GgmlType kType = R::kType;
  static constexpr int kPE = R::kPartElems;
  struct Regs {
    const uint8_t* b;
    int p;
  };
  __device__ static void load(const PlanarView& v, int64_t row, int t, Regs& r) {
    r.b = v.q + row * static_cast<int64_t>(v.q_row_bytes) + static_cast<int64_t>(t / R::kParts) * R::kBlockBytes;
    r.p = t % R::kParts;
  }
  __device__ static void dequant(const PlanarView& v, const Regs& r, float (&w)[kPE]) {
    R::dequant(r.b, r.p, v.tables, w);
  }
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

template <class S, int BM, int BN>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(PlanarView v, const __half* __restrict__ x, int64_t n, float* __restrict__ y, int64_t ys) {
  constexpr int MI = BM / 32, NI = BN / 32;  // mma tiles per warp (16 x rows, 8 weight rows each)
  constexpr int kPE = S::kPE, kPartsRow = kBK / kPE, kParts = BN * kPartsRow;
  constexpr int kPPT = (kParts + kThreads - 1) / kThreads;
  constexpr int kAChunks = BM * kBK / 8 / kThreads;  // 16-byte copies per thread
  static_assert(NI % 2 == 0 && kBK % kPE == 0 && kAChunks >= 1, "tile");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __half* As = reinterpret_cast<__half*>(smem_raw);  // [2][BM][kLds]
  __half* Bs = As + 2 * BM * kLds;                    // [2][BN][kLds]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp & 1, wn = warp >> 1;
  const int64_t k = v.cols, m = v.rows;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * BM, m0 = static_cast<int64_t>(blockIdx.x) * BN;
  // Split-K (gridDim.z > 1): this block's range of k steps, its partial sums at y + z n ys.
  const int KTall = static_cast<int>(k / kBK), nz = static_cast<int>(gridDim.z), z = static_cast<int>(blockIdx.z);
  const int kt0 = static_cast<int>(static_cast<int64_t>(KTall) * z / nz);
  const int KT = static_cast<int>(static_cast<int64_t>(KTall) * (z + 1) / nz);
  y += static_cast<int64_t>(z) * n * ys;

  auto load_a = [&](int kt, int buf) {
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const int c = tid + i * kThreads, r = c >> 3, cc = (c & 7) * 8;
      const int64_t tok = n0 + r;
      const __half* src = x + (tok < n ? tok : 0) * k + static_cast<int64_t>(kt) * kBK + cc;
      cp_async16(As + (buf * BM + r) * kLds + cc, src, tok < n ? 16 : 0);
    }
    cp_async_commit();
  };
  typename S::Regs regs[kPPT];
  auto load_b = [&](int kt) {
#pragma unroll
    for (int i = 0; i < kPPT; ++i) {
      const int p = tid + i * kThreads;
      if (kParts % kThreads == 0 || p < kParts) {
        const int r = p / kPartsRow, pt = p % kPartsRow;
        const int64_t row = m0 + r < m ? m0 + r : m - 1;
        S::load(v, row, kt * kPartsRow + pt, regs[i]);
      }
    }
  };
  auto store_b = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kPPT; ++i) {
      const int p = tid + i * kThreads;
      if (kParts % kThreads == 0 || p < kParts) {
        const int r = p / kPartsRow, pt = p % kPartsRow;
        float w[kPE];
        S::dequant(v, regs[i], w);
        const bool ok = m0 + r < m;
        __half* dst = Bs + (buf * BN + r) * kLds + pt * kPE;
        if constexpr (kPE % 8 == 0) {
#pragma unroll
          for (int j = 0; j < kPE; j += 8) {
            uint4 u;
            u.x = ok ? pack_half2(w[j], w[j + 1]) : 0u;
            u.y = ok ? pack_half2(w[j + 2], w[j + 3]) : 0u;
            u.z = ok ? pack_half2(w[j + 4], w[j + 5]) : 0u;
            u.w = ok ? pack_half2(w[j + 6], w[j + 7]) : 0u;
            *reinterpret_cast<uint4*>(dst + j) = u;
          }
        } else {
          static_assert(kPE == 4, "part size");
          uint2 u;
          u.x = ok ? pack_half2(w[0], w[1]) : 0u;
          u.y = ok ? pack_half2(w[2], w[3]) : 0u;
          *reinterpret_cast<uint2*>(dst) = u;
        }
      }
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int a = 0; a < MI; ++a)
#pragma unroll
    for (int b = 0; b < NI; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

  auto compute = [&](int buf) {
    const __half* A = As + buf * BM * kLds;
    const __half* B = Bs + buf * BN * kLds;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[MI][4], b[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        ldmatrix_x4(a[mi], A + (wm * (BM / 2) + mi * 16 + (lane & 15)) * kLds + kk + (lane >> 4) * 8);
#pragma unroll
      for (int nj = 0; nj < NI / 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, B + (wn * (BN / 4) + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * kLds + kk +
                           ((lane >> 3) & 1) * 8);
        b[2 * nj][0] = r[0], b[2 * nj][1] = r[1], b[2 * nj + 1][0] = r[2], b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], a[mi], b[ni][0], b[ni][1]);
    }
  };

  load_a(kt0, 0);
  load_b(kt0);
  store_b(0);
  cp_async_wait_all();
  __syncthreads();
  for (int kt = kt0; kt < KT; ++kt) {
    const int cur = (kt - kt0) & 1;
    const bool more = kt + 1 < KT;
    if (more) {
      load_a(kt + 1, cur ^ 1);
      load_b(kt + 1);
    }
    compute(cur);
    if (more) store_b(cur ^ 1);
    cp_async_wait_all();
    __syncthreads();
  }

#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int64_t tok = n0 + wm * (BM / 2) + mi * 16 + (lane >> 2);
      const int64_t col = m0 + wn * (BN / 4) + ni * 8 + (lane & 3) * 2;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t t = tok + 8 * h;
        if (t >= n) continue;
        float* yr = y + t * ys;
        if (col < m) yr[col] = acc[mi][ni][2 * h];
        if (col + 1 < m) yr[col + 1] = acc[mi][ni][2 * h + 1];
      }
    }
}

void check_launch_gemm(const char* what);  // gemm.cu: throws df::Error on a launch error

template <class S, int BM, int BN>
void prepare_tile() {
  cudaFuncSetAttribute(gemm_kernel<S, BM, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                       static_cast<int>(smem_bytes<BM, BN>()));
}

template <class S, int BM, int BN>
void launch_tile(const PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, cudaStream_t s, int splits) {
  prepare_tile<S, BM, BN>();  // host-side attribute of the function on the current device
  const dim3 grid(static_cast<unsigned>((v.rows + BN - 1) / BN), static_cast<unsigned>((n + BM - 1) / BM),
                  static_cast<unsigned>(splits));
  gemm_kernel<S, BM, BN><<<grid, kThreads, smem_bytes<BM, BN>(), s>>>(v, x, n, y, ys);
  check_launch_gemm("gemm");
}

// Blocks of a tile over the problem.
inline int64_t tile_blocks(int64_t m, int64_t n, int bm, int bn) { return ((m + bn - 1) / bn) * ((n + bm - 1) / bm); }

// The default tile: the largest that still gives every multiprocessor two blocks.
inline int auto_code(int64_t m, int64_t n, bool all_tiles) {
  constexpr int64_t kWant = 2 * 132;
  if (tile_blocks(m, n, 128, 128) >= kWant) return 1;
  if (all_tiles && tile_blocks(m, n, 64, 128) >= kWant) return 2;
  if (all_tiles && tile_blocks(m, n, 128, 64) >= kWant) return 3;
  return 4;
}

// Launch by tile code (0 = auto; + 16 S: S-way split-K); false for an unknown code. kAll: all
// four tiles are built.
template <class S, bool kAll>
bool launch_code(const PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code, cudaStream_t s) {
  const int splits = code >= 16 ? code / 16 : 1;
  code %= 16;
  if (splits > static_cast<int>(v.cols / kBK)) return false;  // every range at least one k step
  if (code == 0) code = auto_code(v.rows, n, kAll);
  switch (code) {
    case 1: launch_tile<S, 128, 128>(v, x, n, y, ys, s, splits); return true;
    case 4: launch_tile<S, 64, 64>(v, x, n, y, ys, s, splits); return true;
    default: break;
  }
  if constexpr (kAll) {
    switch (code) {
      case 2: launch_tile<S, 64, 128>(v, x, n, y, ys, s, splits); return true;
      case 3: launch_tile<S, 128, 64>(v, x, n, y, ys, s, splits); return true;
      default: break;
    }
  }
  return false;
}

template <class... Ss>
struct SourceList {};

// The launch of W's type among Ss; false when none matches or the code is unknown.
template <bool kAll, class... Ss>
bool launch_list(SourceList<Ss...>, GgmlType t, const PlanarView& v, const __half* x, int64_t n, float* y,
                 int64_t ys, int code, cudaStream_t s) {
  bool ok = false;
  const bool found = ((Ss::kType == t ? (ok = launch_code<Ss, kAll>(v, x, n, y, ys, code, s), true) : false) || ...);
  return found && ok;
}

}  // namespace df::cuda::gemm
