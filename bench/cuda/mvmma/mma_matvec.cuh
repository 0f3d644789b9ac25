// Tensor-core int8 matvec for n = 1..8 rows (helper mvmma, issue 11): Q4_0 and Q8_0 weights
// times x rounded to int8 per 32-block exactly as the dp4a path rounds it (xq.cuh, Q8_0
// rounding: d = fp16(amax / 127), q = min(127, rne(x * 127 / amax))).
//
// One mma.sync.m16n8k32.s8 per (16 weight rows, one 32-block): A = the block's 16 x 32 int8
// weights, B = 32 x 8 int8 x (column j = x row j; columns j >= n are zero), C = the 16 x 8
// exact int32 block dots. Per output (row r, x row j) the thread that holds C[r][j] adds
// fmaf(d_w d_x, float(dot), acc) over the blocks of its k-range in increasing order. The
// k-ranges: ks splits over CTAs (grid.y; partials through L2, added in split order by the CTA
// that finishes a row tile last), each split over wk warps of a CTA (added in warp order in
// shared memory): total = sum_s (sum_w chain(s, w)), ks and wk a function of the matrix shape
// only. So a row's bits depend on its own x row and the shape, never on
// n (the columns of a C never mix), and are a fixed float order that a CPU emulation
// reproduces exactly (bench_mvmma_cuda checks it). They are not the dp4a kernel's bits (that
// kernel sums per lane over blocks l, l + 32 wpr, ..., then a butterfly).
//
// Weight layout (repacked at load, the ggml bytes re-ordered, nothing expanded): tiles of 16
// rows x 4 blocks (128 elements), tile (rt, kg) at (rt * KG + kg) * kQTile in the quant plane,
// (rt * KG + kg) * 128 in the scale plane. Lane L = 4 g + t (g = L / 4, t = L % 4) of a warp
// reads its A fragments of the tile with 16-byte loads at L * kQLane:
//   Q4_0 (32 B): [h = 0, 1][block b = 0..3] the 4 bytes qs[4t .. 4t + 3] of row g + 8h (low
//        nibbles: k = 4t .. 4t + 3, high: k = 16 + 4t ..);
//   Q8_0 (64 B): [block b][a0 a1 a2 a3]: qs[4t..] of row g, of row g + 8, qs[16 + 4t..] of
//        row g, of row g + 8 (the mma's A registers as they are).
// Scales: [g][h][b] fp16 (16 bytes per g, read by the 4 lanes of the group).
// Q4_0's nibbles become ((q - 8) << 4) int8 with two logic ops per 4 (the dot is then 16x, and
// x's scale is stored / 16: d_w (d_x / 16) (16 s) = (d_w d_x) s exactly, powers of two).
//
// x in shared memory, per CTA only the k-range of its split: per x row, [kg][t][b][2 words]
// (lane 4 g + t reads the B registers of 4 blocks of x row g as 32 contiguous bytes; rows
// padded to 16 mod 128 bytes: no bank conflicts), then the scales [row][block] f32.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/types.h"

namespace df::mvmma {

constexpr int kWarps = 8;          // warps per CTA: 8 row tiles of one split
constexpr int kTileRows = 16;      // rows per mma tile
constexpr int kGroupElems = 128;   // 4 blocks of 32 per tile
constexpr int kScaleTile = 128;    // 16 rows x 4 blocks x fp16

struct View {
  const uint8_t* q;   // quant plane
  const uint8_t* s;   // scale plane
  int64_t rows, cols;
};

__host__ __device__ constexpr int64_t xrow_bytes(int nkg) { return int64_t{nkg} * 128 + 16; }
__host__ __device__ constexpr int64_t dstride_of(int nkg) { return ((int64_t{nkg} * 4 + 31) & ~int64_t{31}) + 4; }
// Shared memory of N x rows over nkg k-groups.
__host__ __device__ constexpr size_t smem_bytes(int n, int nkg) {
  return static_cast<size_t>(n) * static_cast<size_t>(xrow_bytes(nkg) + 4 * dstride_of(nkg));
}

__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void mma_s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

struct MmaQ4_0 {
  static constexpr GgmlType kType = GgmlType::Q4_0;
  static constexpr int kQTile = 1024, kQLane = 32, kQWords = 2;
  static constexpr float kXScale = 0.0625f;  // the dot is 16x: x's scale stored / 16
  // The A registers of block b (0..3): q[0] holds row g's words, q[1] row g + 8's.
  __device__ static void afrag(const uint4 (&q)[kQWords], int b, uint32_t (&a)[4]) {
    const uint32_t w0 = word_of(q[0], b), w1 = word_of(q[1], b);
    a[0] = ((w0 << 4) & 0xf0f0f0f0u) ^ 0x80808080u;
    a[1] = ((w1 << 4) & 0xf0f0f0f0u) ^ 0x80808080u;
    a[2] = (w0 & 0xf0f0f0f0u) ^ 0x80808080u;
    a[3] = (w1 & 0xf0f0f0f0u) ^ 0x80808080u;
  }
};

struct MmaQ8_0 {
  static constexpr GgmlType kType = GgmlType::Q8_0;
  static constexpr int kQTile = 2048, kQLane = 64, kQWords = 4;
  static constexpr float kXScale = 1.0f;
  __device__ static void afrag(const uint4 (&q)[kQWords], int b, uint32_t (&a)[4]) {
    const uint4 v = q[b];
    a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w;
  }
};

// Rounds x rows 0..N-1, elements [kg0 * 128, kg1 * 128), into the shared layout above (the
// xq.cuh Q8_0 arithmetic: 4 threads per 32-block, 8 elements each).
template <class F, int N>
__device__ void quantize_slice(const float* __restrict__ x, int64_t cols, int kg0, int nkg, uint8_t* xs, float* ds) {
  const int slice = nkg * kGroupElems, total8 = N * slice / 8;
  const int64_t xrb = xrow_bytes(nkg), dst = dstride_of(nkg);
  for (int base = 0; base < total8; base += blockDim.x) {
    const int i = base + static_cast<int>(threadIdx.x);
    const bool ok = i < total8;  // whole groups of 4 (total8 % 4 == 0)
    const int e = 8 * (ok ? i : 0), j = e / slice, c = e - j * slice;
    float4 xa = make_float4(0.f, 0.f, 0.f, 0.f), xb = xa;
    if (ok) {
      const float* src = x + static_cast<int64_t>(j) * cols + int64_t{kg0} * kGroupElems + c;
      xa = __ldg(reinterpret_cast<const float4*>(src));
      xb = __ldg(reinterpret_cast<const float4*>(src + 4));
    }
    const float v[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
    float am = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) am = fmaxf(am, fabsf(v[k]));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 1));
    am = fmaxf(am, __shfl_xor_sync(0xffffffffu, am, 2));
    const float d = __half2float(__float2half_rn(am / 127.0f));
    const float mul = am > 0.0f ? 127.0f / am : 0.0f;
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int q = min(127, __float2int_rn(__fmul_rn(v[k], mul)));
      w[k / 4] |= (static_cast<uint32_t>(q) & 0xffu) << (8 * (k % 4));
    }
    if (ok) {
      const int bl = c / 32, k0 = c % 32, half = k0 / 16, t0 = (k0 % 16) / 4;
      const int kgl = bl / 4, b = bl % 4;
      uint8_t* row = xs + j * xrb;
      *reinterpret_cast<uint32_t*>(row + ((kgl * 4 + t0) * 4 + b) * 8 + half * 4) = w[0];
      *reinterpret_cast<uint32_t*>(row + ((kgl * 4 + t0 + 1) * 4 + b) * 8 + half * 4) = w[1];
      if (k0 == 0) ds[j * dst + bl] = d * F::kXScale;
    }
  }
}

// grid (ceil(tiles / 8), ks); part: [ks][8][rows] f32 and cnt: [tiles] u32 (zero; left zero)
// when ks > 1. D: k-groups whose loads are in flight per warp.
template <class F, int N, int D>
__global__ void __launch_bounds__(kWarps * 32) mma_matvec(View v, const float* __restrict__ x, float* __restrict__ y,
                                                          float* __restrict__ part, unsigned* __restrict__ cnt, int wk) {
  extern __shared__ uint4 smem_u4[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int ks = static_cast<int>(gridDim.y), s = static_cast<int>(blockIdx.y);
  const int KG = static_cast<int>(v.cols / kGroupElems);
  const int kg0 = static_cast<int>(int64_t{s} * KG / ks), kg1 = static_cast<int>(int64_t{s + 1} * KG / ks);
  const int nkg = kg1 - kg0;
  // wk warps per row tile split the CTA's k-range once more (added in warp order in shared memory)
  const int sub = warp % wk, tpc = kWarps / wk;
  const int wkg0 = static_cast<int>(int64_t{sub} * nkg / wk), wkg1 = static_cast<int>(int64_t{sub + 1} * nkg / wk);
  const int nw = wkg1 - wkg0;  // this warp's k-groups, from wkg0 (relative to kg0)
  const int64_t tiles = v.rows / kTileRows;
  const int64_t rt = int64_t{blockIdx.x} * tpc + warp / wk;
  const bool active = rt < tiles;

  struct Regs {
    uint4 q[F::kQWords];
    uint4 sc;
  };
  const uint8_t* qbase = v.q + (rt * KG + kg0 + wkg0) * F::kQTile + lane * F::kQLane;
  const uint8_t* sbase = v.s + (rt * KG + kg0 + wkg0) * kScaleTile + g * 16;
  auto load = [&](Regs& r, int i) {
#pragma unroll
    for (int w = 0; w < F::kQWords; ++w) r.q[w] = ldg_stream(qbase + int64_t{i} * F::kQTile + 16 * w);
    r.sc = ldg_stream(sbase + int64_t{i} * kScaleTile);
  };
  Regs ring[D];
  if (active) {
#pragma unroll
    for (int d = 0; d < D; ++d)
      if (d < nw) load(ring[d], d);
  }
  // PDL: the weight loads above may overlap the previous kernel; x, y, part, cnt only after it.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  uint8_t* xs = reinterpret_cast<uint8_t*>(smem_u4);
  float* ds = reinterpret_cast<float*>(xs + N * xrow_bytes(nkg));
  quantize_slice<F, N>(x, v.cols, kg0, nkg, xs, ds);
  __syncthreads();

  const int64_t xrb = xrow_bytes(nkg), dst = dstride_of(nkg);
  const int ja = 2 * t, jb = 2 * t + 1;  // the x rows of this lane's C columns
  float acc[4] = {0.f, 0.f, 0.f, 0.f};   // (row g, ja), (g, jb), (g + 8, ja), (g + 8, jb)
  auto compute = [&](const Regs& r, int iw) {
    const int i = wkg0 + iw;  // the k-group within the CTA's slice
    uint4 xb0 = make_uint4(0, 0, 0, 0), xb1 = xb0;
    if (g < N) {
      const uint8_t* p = xs + g * xrb + (i * 4 + t) * 32;
      xb0 = *reinterpret_cast<const uint4*>(p);
      xb1 = *reinterpret_cast<const uint4*>(p + 16);
    }
    float4 da = make_float4(0.f, 0.f, 0.f, 0.f), db = da;
    if (ja < N) da = *reinterpret_cast<const float4*>(ds + ja * dst + 4 * i);
    if (jb < N) db = *reinterpret_cast<const float4*>(ds + jb * dst + 4 * i);
    const float dxa[4] = {da.x, da.y, da.z, da.w}, dxb[4] = {db.x, db.y, db.z, db.w};
    const __half2 s01 = *reinterpret_cast<const __half2*>(&r.sc.x), s23 = *reinterpret_cast<const __half2*>(&r.sc.y);
    const __half2 s45 = *reinterpret_cast<const __half2*>(&r.sc.z), s67 = *reinterpret_cast<const __half2*>(&r.sc.w);
    const float2 w01 = __half22float2(s01), w23 = __half22float2(s23), w45 = __half22float2(s45), w67 = __half22float2(s67);
    const float dw0[4] = {w01.x, w01.y, w23.x, w23.y}, dw1[4] = {w45.x, w45.y, w67.x, w67.y};
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      uint32_t a[4];
      F::afrag(r.q, b, a);
      const uint4& xb = b < 2 ? xb0 : xb1;
      int c[4] = {0, 0, 0, 0};
      mma_s8(c, a[0], a[1], a[2], a[3], word_of(xb, 2 * (b % 2)), word_of(xb, 2 * (b % 2) + 1));
      acc[0] = fmaf(__fmul_rn(dw0[b], dxa[b]), __int2float_rn(c[0]), acc[0]);
      acc[1] = fmaf(__fmul_rn(dw0[b], dxb[b]), __int2float_rn(c[1]), acc[1]);
      acc[2] = fmaf(__fmul_rn(dw1[b], dxa[b]), __int2float_rn(c[2]), acc[2]);
      acc[3] = fmaf(__fmul_rn(dw1[b], dxb[b]), __int2float_rn(c[3]), acc[3]);
    }
  };
  if (active)
    for (int i0 = 0; i0 < nw; i0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int i = i0 + d;
        if (i < nw) {
          compute(ring[d], i);
          if (i + D < nw) load(ring[d], i + D);
        }
      }
    }
  if (wk > 1) {  // the tile's warps' sums in warp order, by its first warp
    __shared__ float4 red[kWarps][32];
    red[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (sub == 0)
      for (int w = 1; w < wk; ++w) {
        const float4 o = red[warp + w][lane];
        acc[0] += o.x, acc[1] += o.y, acc[2] += o.z, acc[3] += o.w;
      }
  }
  if (!active || sub != 0) return;
  const int64_t r0 = rt * kTileRows + g, r1 = r0 + 8;
  const int64_t rows = v.rows;
  if (ks == 1) {
    if (ja < N) y[ja * rows + r0] = acc[0], y[ja * rows + r1] = acc[2];
    if (jb < N) y[jb * rows + r0] = acc[1], y[jb * rows + r1] = acc[3];
    return;
  }
  // The splits' partials, added in split order by the warp that finishes the tile last.
  float* ps = part + int64_t{s} * 8 * rows;
  if (ja < N) __stcg(ps + ja * rows + r0, acc[0]), __stcg(ps + ja * rows + r1, acc[2]);
  if (jb < N) __stcg(ps + jb * rows + r0, acc[1]), __stcg(ps + jb * rows + r1, acc[3]);
  __threadfence();
  __syncwarp();
  unsigned old = 0;
  if (lane == 0) old = atomicAdd(cnt + rt, 1u);
  old = __shfl_sync(0xffffffffu, old, 0);
  if (old != static_cast<unsigned>(ks - 1)) return;
  __threadfence();
  auto total = [&](int j, int64_t r) {
    float a = __ldcg(part + j * rows + r);
    for (int k = 1; k < ks; ++k) a += __ldcg(part + (int64_t{k} * 8 + j) * rows + r);
    return a;
  };
  if (ja < N) y[ja * rows + r0] = total(ja, r0), y[ja * rows + r1] = total(ja, r1);
  if (jb < N) y[jb * rows + r0] = total(jb, r0), y[jb * rows + r1] = total(jb, r1);
  if (lane == 0) cnt[rt] = 0;
}

// ---- host side ----

inline size_t quant_plane_bytes(GgmlType t, int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows / kTileRows) * static_cast<size_t>(cols / kGroupElems) * (t == GgmlType::Q4_0 ? 1024 : 2048);
}
inline size_t scale_plane_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows / kTileRows) * static_cast<size_t>(cols / kGroupElems) * kScaleTile;
}
inline bool shape_ok(int64_t rows, int64_t cols) { return rows % kTileRows == 0 && cols % kGroupElems == 0; }

// ggml blocks (rows x cols / 32 blocks of Q4_0 or Q8_0) -> quant plane q, scale plane s.
inline void pack(GgmlType t, int64_t rows, int64_t cols, const uint8_t* blocks, uint8_t* q, uint8_t* s) {
  const int64_t nb = cols / 32, KG = cols / kGroupElems;
  const bool q4 = t == GgmlType::Q4_0;
  const size_t bb = q4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const int qt = q4 ? 1024 : 2048, ql = q4 ? 32 : 64;
  for (int64_t rt = 0; rt < rows / kTileRows; ++rt)
    for (int64_t kg = 0; kg < KG; ++kg) {
      uint8_t* qt_p = q + (rt * KG + kg) * qt;
      uint8_t* st_p = s + (rt * KG + kg) * kScaleTile;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, tt = lane % 4;
        for (int h = 0; h < 2; ++h)
          for (int b = 0; b < 4; ++b) {
            const int64_t row = rt * kTileRows + g + 8 * h, blk = kg * 4 + b;
            const uint8_t* src = blocks + (row * nb + blk) * bb;
            if (q4) {
              std::memcpy(qt_p + lane * ql + (h * 4 + b) * 4, src + 2 + 4 * tt, 4);
            } else {
              std::memcpy(qt_p + lane * ql + b * 16 + h * 4, src + 2 + 4 * tt, 4);
              std::memcpy(qt_p + lane * ql + b * 16 + 8 + h * 4, src + 2 + 16 + 4 * tt, 4);
            }
            if (tt == 0) std::memcpy(st_p + g * 16 + (h * 4 + b) * 2, src, 2);
          }
      }
    }
}

// The splits of a shape (a function of rows and cols only, so the bits never depend on n): the
// fewest (a power of two) that give >= ~2.4 CTAs per SM of 132, at most KG / 2 per split.
inline int default_splits(int64_t rows, int64_t cols) {
  const int64_t ctas = (rows / kTileRows + kWarps - 1) / kWarps, KG = cols / kGroupElems;
  int ks = 1;
  while (ctas * ks < 316 && ks * 4 <= KG) ks *= 2;
  return ks;
}

template <class F, int N, int D>
void prepare() {
  cudaFuncSetAttribute(mma_matvec<F, N, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
}

template <class F, int N, int D>
cudaError_t launch(const View& v, const float* x, float* y, float* part, unsigned* cnt, int ks, int wk, bool pdl,
                   cudaStream_t st) {
  const int KG = static_cast<int>(v.cols / kGroupElems);
  const int nkg_max = (KG + ks - 1) / ks;
  const size_t smem = smem_bytes(N, nkg_max);
  const int tpc = kWarps / wk;  // row tiles per CTA
  const dim3 grid(static_cast<unsigned>((v.rows / kTileRows + tpc - 1) / tpc), static_cast<unsigned>(ks));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kWarps * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = pdl ? attr : nullptr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, mma_matvec<F, N, D>, v, x, y, part, cnt, wk);
}

}  // namespace df::mvmma
