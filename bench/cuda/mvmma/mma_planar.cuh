// The tensor-core int8 matvec of mma_matvec.cuh (helper mvmma) with its weight reads made a
// policy (helper mvmma2, issue 11), so that it reads the backend's planar layout as it is
// (layout.cuh: per row the Q4_0 blocks' qs as consecutive 16-byte words, Q8_0's as two, then
// a meta plane of fp16 d per block: the bytes cudamv::pack_weight already holds, no second
// copy), and with separate instances for wk = 1 (no shared-memory split sum in the code).
//
// Every source hands the compute step the registers the tile layout would have given the lane
// (mma_matvec.cuh: per lane L = 4 g + t, Q4_0 q[h].word(b) = qs word t of block b of row g + 8h;
// Q8_0 q[b] = {qs word t of row g, of row g + 8, qs word 4 + t of row g, of row g + 8}; sc =
// [h][b] fp16), so the arithmetic after the loads is mma_matvec.cuh's, instruction for
// instruction in the same float order: the same bits as the tile kernel at every (ks, wk).
//   SrcTile:   mma_matvec.cuh's repacked tiles (16-byte loads, nothing to do);
//   SrcShfl:   planar; lane (g, t) loads block t of the k-group of rows g and g + 8 as 16-byte
//              words (a quad reads 64 (Q8_0: 128) contiguous bytes of a row), then a 4 x 4
//              transpose of 32-bit words within the quad (2 x 2 shuffles) gives it word t of
//              each of the 4 blocks; scales: 8-byte loads of 4 fp16 of rows g and g + 8;
//   SrcLd32:   planar; each lane loads its words t (and 4 + t) of each block with 4-byte
//              loads (8 per k-group for Q4_0, 16 for Q8_0; L1-cached: a 32-byte sector
//              serves two blocks), no shuffles.
#pragma once
#include "mvmma/mma_matvec.cuh"

namespace df::mvmma2 {

using mvmma::kGroupElems;
using mvmma::kScaleTile;
using mvmma::kTileRows;
using mvmma::kWarps;

// Either layout: tile (q, m = quant and scale planes) or planar (q, m = quant and meta planes
// with their row strides, as PackedWeight).
struct WView {
  const uint8_t* q;
  const uint8_t* m;
  int64_t q_row_bytes, m_row_bytes;
  int64_t rows, cols;
};

__device__ __forceinline__ uint2 ldg_u2(const void* p) { return __ldg(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint32_t ldg_u32(const void* p) { return __ldg(reinterpret_cast<const unsigned*>(p)); }
__device__ __forceinline__ void set_word(uint4& v, int i, uint32_t w) {
  if (i == 0) v.x = w;
  else if (i == 1) v.y = w;
  else if (i == 2) v.z = w;
  else v.w = w;
}

// Within each quad of lanes (t = lane % 4): in, lane t holds W[t][0..3]; out, W[0..3][t].
__device__ __forceinline__ uint4 quad_transpose(const uint4 v, int t) {
  const bool th = (t & 2) != 0, tl = (t & 1) != 0;
  uint32_t s0 = th ? v.x : v.z, s1 = th ? v.y : v.w;
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, s0, 2), r1 = __shfl_xor_sync(0xffffffffu, s1, 2);
  // m[2 bh + i] = W[2 bh + tl][2 th + i]
  const uint32_t m0 = th ? r0 : v.x, m1 = th ? r1 : v.y, m2 = th ? v.z : r0, m3 = th ? v.w : r1;
  s0 = tl ? m0 : m1, s1 = tl ? m2 : m3;
  r0 = __shfl_xor_sync(0xffffffffu, s0, 1), r1 = __shfl_xor_sync(0xffffffffu, s1, 1);
  return tl ? make_uint4(r0, m1, r1, m3) : make_uint4(m0, r0, m2, r1);
}

template <class F>
struct SrcTile {
  static constexpr int kId = 0;
  struct Regs {
    uint4 q[F::kQWords];
    uint4 sc;
  };
  const uint8_t* qb;
  const uint8_t* sb;
  // rt: the row tile; kg: its first k-group of this warp.
  __device__ SrcTile(const WView& v, int64_t rt, int kg, int lane) {
    const int64_t KG = v.cols / kGroupElems;
    qb = v.q + (rt * KG + kg) * F::kQTile + lane * F::kQLane;
    sb = v.m + (rt * KG + kg) * kScaleTile + (lane >> 2) * 16;
  }
  __device__ void load(Regs& r, int i) const {
#pragma unroll
    for (int w = 0; w < F::kQWords; ++w) r.q[w] = mvmma::ldg_stream(qb + int64_t{i} * F::kQTile + 16 * w);
    r.sc = mvmma::ldg_stream(sb + int64_t{i} * kScaleTile);
  }
  __device__ static void tile(const Regs& r, int, uint4 (&q)[F::kQWords], uint4& sc) {
#pragma unroll
    for (int w = 0; w < F::kQWords; ++w) q[w] = r.q[w];
    sc = r.sc;
  }
};

// Planar row pointers of a lane: rows g and g + 8 of tile rt, from k-group kg.
template <class F>
struct PlanarRows {
  static constexpr bool kQ4 = F::kType == GgmlType::Q4_0;
  static constexpr int kKgBytes = kQ4 ? 64 : 128;  // quant bytes of one row's k-group
  const uint8_t* q0;
  const uint8_t* q1;
  const uint8_t* m0;
  const uint8_t* m1;
  __device__ PlanarRows(const WView& v, int64_t rt, int kg, int64_t lane_off, int lane) {
    const int64_t row = rt * kTileRows + (lane >> 2);
    q0 = v.q + row * v.q_row_bytes + int64_t{kg} * kKgBytes + lane_off;
    q1 = q0 + 8 * v.q_row_bytes;
    m0 = v.m + row * v.m_row_bytes + int64_t{kg} * 8;
    m1 = m0 + 8 * v.m_row_bytes;
  }
};

template <class F>
struct SrcShfl {
  static constexpr int kId = 1;
  using P = PlanarRows<F>;
  static constexpr int kHalf = F::kQWords / 2;  // 16-byte words per row and lane: Q4_0 1, Q8_0 2
  struct Regs {
    uint4 q[F::kQWords];  // [0, kHalf): row g's block t, then row g + 8's
    uint2 s0, s1;         // fp16 d of the 4 blocks, rows g and g + 8
  };
  P p;
  __device__ SrcShfl(const WView& v, int64_t rt, int kg, int lane) : p(v, rt, kg, int64_t{lane & 3} * (P::kKgBytes / 4), lane) {}
  __device__ void load(Regs& r, int i) const {
    const int64_t o = int64_t{i} * P::kKgBytes;
#pragma unroll
    for (int w = 0; w < kHalf; ++w) {
      r.q[w] = mvmma::ldg_stream(p.q0 + o + 16 * w);
      r.q[kHalf + w] = mvmma::ldg_stream(p.q1 + o + 16 * w);
    }
    r.s0 = ldg_u2(p.m0 + 8 * i), r.s1 = ldg_u2(p.m1 + 8 * i);
  }
  __device__ static void tile(const Regs& r, int t, uint4 (&q)[F::kQWords], uint4& sc) {
    if constexpr (P::kQ4) {
      q[0] = quad_transpose(r.q[0], t);
      q[1] = quad_transpose(r.q[1], t);
    } else {
      const uint4 g0 = quad_transpose(r.q[0], t), g1 = quad_transpose(r.q[1], t);
      const uint4 h0 = quad_transpose(r.q[2], t), h1 = quad_transpose(r.q[3], t);
      q[0] = make_uint4(g0.x, h0.x, g1.x, h1.x);
      q[1] = make_uint4(g0.y, h0.y, g1.y, h1.y);
      q[2] = make_uint4(g0.z, h0.z, g1.z, h1.z);
      q[3] = make_uint4(g0.w, h0.w, g1.w, h1.w);
    }
    sc = make_uint4(r.s0.x, r.s0.y, r.s1.x, r.s1.y);
  }
};

template <class F>
struct SrcLd32 {
  static constexpr int kId = 2;
  using P = PlanarRows<F>;
  struct Regs {
    uint4 q[F::kQWords];  // already the tile registers
    uint2 s0, s1;
  };
  P p;
  __device__ SrcLd32(const WView& v, int64_t rt, int kg, int lane) : p(v, rt, kg, int64_t{lane & 3} * 4, lane) {}
  __device__ void load(Regs& r, int i) const {
    const int64_t o = int64_t{i} * P::kKgBytes;
    if constexpr (P::kQ4) {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        set_word(r.q[0], b, ldg_u32(p.q0 + o + 16 * b));
        set_word(r.q[1], b, ldg_u32(p.q1 + o + 16 * b));
      }
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b)
        r.q[b] = make_uint4(ldg_u32(p.q0 + o + 32 * b), ldg_u32(p.q1 + o + 32 * b), ldg_u32(p.q0 + o + 32 * b + 16),
                            ldg_u32(p.q1 + o + 32 * b + 16));
    }
    r.s0 = ldg_u2(p.m0 + 8 * i), r.s1 = ldg_u2(p.m1 + 8 * i);
  }
  __device__ static void tile(const Regs& r, int, uint4 (&q)[F::kQWords], uint4& sc) {
#pragma unroll
    for (int w = 0; w < F::kQWords; ++w) q[w] = r.q[w];
    sc = make_uint4(r.s0.x, r.s0.y, r.s1.x, r.s1.y);
  }
};

// mma_matvec.cuh's kernel over a source S; kWk = false: the instance for wk = 1 (wk ignored).
template <class F, template <class> class S, int N, int D, bool kWk>
__global__ void __launch_bounds__(kWarps * 32) mma2_matvec(WView v, const float* __restrict__ x, float* __restrict__ y,
                                                           float* __restrict__ part, unsigned* __restrict__ cnt, int wk_arg) {
  extern __shared__ uint4 smem_u4[];
  const int wk = kWk ? wk_arg : 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int ks = static_cast<int>(gridDim.y), s = static_cast<int>(blockIdx.y);
  const int KG = static_cast<int>(v.cols / kGroupElems);
  const int kg0 = static_cast<int>(int64_t{s} * KG / ks), kg1 = static_cast<int>(int64_t{s + 1} * KG / ks);
  const int nkg = kg1 - kg0;
  const int sub = kWk ? warp % wk : 0, tpc = kWk ? kWarps / wk : kWarps;
  const int wkg0 = kWk ? static_cast<int>(int64_t{sub} * nkg / wk) : 0;
  const int wkg1 = kWk ? static_cast<int>(int64_t{sub + 1} * nkg / wk) : nkg;
  const int nw = wkg1 - wkg0;
  const int64_t tiles = v.rows / kTileRows;
  const int64_t rt = int64_t{blockIdx.x} * tpc + (kWk ? warp / wk : warp);
  const bool active = rt < tiles;

  using Src = S<F>;
  const Src src(v, active ? rt : 0, kg0 + wkg0, lane);
  typename Src::Regs ring[D];
  if (active) {
#pragma unroll
    for (int d = 0; d < D; ++d)
      if (d < nw) src.load(ring[d], d);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  uint8_t* xs = reinterpret_cast<uint8_t*>(smem_u4);
  float* ds = reinterpret_cast<float*>(xs + N * mvmma::xrow_bytes(nkg));
  mvmma::quantize_slice<F, N>(x, v.cols, kg0, nkg, xs, ds);
  __syncthreads();

  const int64_t xrb = mvmma::xrow_bytes(nkg), dst = mvmma::dstride_of(nkg);
  const int ja = 2 * t, jb = 2 * t + 1;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};  // (row g, ja), (g, jb), (g + 8, ja), (g + 8, jb)
  auto compute = [&](const typename Src::Regs& r, int iw) {
    const int i = wkg0 + iw;
    uint4 q[F::kQWords], sc;
    Src::tile(r, t, q, sc);
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
    const __half2 s01 = *reinterpret_cast<const __half2*>(&sc.x), s23 = *reinterpret_cast<const __half2*>(&sc.y);
    const __half2 s45 = *reinterpret_cast<const __half2*>(&sc.z), s67 = *reinterpret_cast<const __half2*>(&sc.w);
    const float2 w01 = __half22float2(s01), w23 = __half22float2(s23), w45 = __half22float2(s45), w67 = __half22float2(s67);
    const float dw0[4] = {w01.x, w01.y, w23.x, w23.y}, dw1[4] = {w45.x, w45.y, w67.x, w67.y};
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      uint32_t a[4];
      F::afrag(q, b, a);
      const uint4& xb = b < 2 ? xb0 : xb1;
      int c[4] = {0, 0, 0, 0};
      mvmma::mma_s8(c, a[0], a[1], a[2], a[3], mvmma::word_of(xb, 2 * (b % 2)), mvmma::word_of(xb, 2 * (b % 2) + 1));
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
          if (i + D < nw) src.load(ring[d], i + D);
        }
      }
    }
  if constexpr (kWk) {
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
  }
  if (!active || sub != 0) return;
  const int64_t r0 = rt * kTileRows + g, r1 = r0 + 8;
  const int64_t rows = v.rows;
  if (ks == 1) {
    if (ja < N) y[ja * rows + r0] = acc[0], y[ja * rows + r1] = acc[2];
    if (jb < N) y[jb * rows + r0] = acc[1], y[jb * rows + r1] = acc[3];
    return;
  }
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

template <class F, template <class> class S, int N, int D, bool kWk>
void prepare() {
  cudaFuncSetAttribute(mma2_matvec<F, S, N, D, kWk>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
}

// wk = 1 launches the kWk = false instance, wk > 1 the kWk = true one.
template <class F, template <class> class S, int N, int D>
cudaError_t launch(const WView& v, const float* x, float* y, float* part, unsigned* cnt, int ks, int wk, bool pdl,
                   cudaStream_t st) {
  const int KG = static_cast<int>(v.cols / kGroupElems);
  const size_t smem = mvmma::smem_bytes(N, (KG + ks - 1) / ks);
  const int tpc = kWarps / wk;
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
  if (wk == 1) return cudaLaunchKernelEx(&cfg, mma2_matvec<F, S, N, D, false>, v, x, y, part, cnt, wk);
  return cudaLaunchKernelEx(&cfg, mma2_matvec<F, S, N, D, true>, v, x, y, part, cnt, wk);
}

}  // namespace df::mvmma2
