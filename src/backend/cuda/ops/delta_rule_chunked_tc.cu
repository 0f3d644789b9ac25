#include "backend/cuda/ops/delta_rule_chunked_tc.cuh"

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"

namespace df::cuda {
namespace {

constexpr int kC = 64;         // tokens per chunk
constexpr int kThreads = 256;  // 8 warps in every kernel

// The scratch's parts (floats; npad = chunks * kC rows, every part a multiple of 4 floats).
struct Scratch {
  float* G;   // [Hv][npad]: the chunk's inclusive sums of g
  float* W;   // [npad][Hv][d]
  float* U;   // [npad][Hv][d]
  float* VN;  // [npad][Hv][d]: vnew
  float* QK;  // [chunks][Hv][kC][kC]: scale e^{G_t - G_s} q_t . k_s (s <= t), else 0
  float* HS;  // [chunks][Hv][d][d]: the state at the chunk's start (rows j, cols i)
  int64_t npad = 0;
  int nc = 0;
};

int64_t chunks(int64_t n) { return (n + kC - 1) / kC; }

Scratch carve(void* base, int64_t n, int32_t hv, int32_t d) {
  Scratch s;
  s.nc = static_cast<int>(chunks(n));
  s.npad = static_cast<int64_t>(s.nc) * kC;
  float* p = static_cast<float*>(base);
  s.G = p, p += static_cast<int64_t>(hv) * s.npad;
  s.W = p, p += s.npad * hv * d;
  s.U = p, p += s.npad * hv * d;
  s.VN = p, p += s.npad * hv * d;
  s.QK = p, p += static_cast<int64_t>(s.nc) * hv * kC * kC;
  s.HS = p;
  return s;
}

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One warp: acc[nt] += A[0, 16) x [k0, k1) * B[k0, k1) x [8 nt, 8 nt + 8) for nt < nt_n (warp-uniform,
// <= NT), A(m, k) = A[m * ars + k * acs], B(k, n) = B[k * brs + n * bcs] (shared memory, f32).
// Fragments of m16n8k8: a (g, q) (g + 8, q) (g, q + 4) (g + 8, q + 4); b (q, g) (q + 4, g);
// c (g, 2q) (g, 2q + 1) (g + 8, 2q) (g + 8, 2q + 1), with g = lane / 4, q = lane % 4.
template <int NT, bool kSplit>
__device__ __forceinline__ void warp_mma(float (&acc)[NT][4], const float* A, int ars, int acs, const float* B, int brs,
                                         int bcs, int k0, int k1, int nt_n = NT) {
  const int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
#pragma unroll 2
  for (int k = k0; k < k1; k += 8) {
    const float* ap = A + (k + q) * acs + g * ars;
    const float x[4] = {ap[0], ap[8 * ars], ap[4 * acs], ap[8 * ars + 4 * acs]};
    uint32_t ah[4], al[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      ah[r] = to_tf32(x[r]);
      if (kSplit) al[r] = to_tf32(x[r] - __uint_as_float(ah[r]));
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      if (nt < nt_n) {
        const float* bp = B + (k + q) * brs + (8 * nt + g) * bcs;
        const float y0 = bp[0], y1 = bp[4 * brs];
        const uint32_t bh0 = to_tf32(y0), bh1 = to_tf32(y1);
        if (kSplit) {
          const uint32_t bl0 = to_tf32(y0 - __uint_as_float(bh0)), bl1 = to_tf32(y1 - __uint_as_float(bh1));
          mma_tf32(acc[nt], al, bh0, bh1);
          mma_tf32(acc[nt], ah, bl0, bl1);
        }
        mma_tf32(acc[nt], ah, bh0, bh1);
      }
    }
  }
}

__device__ __forceinline__ unsigned saddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
// 16 bytes global -> shared, asynchronously; zeros when !valid (src then only an address).
__device__ __forceinline__ void cp16(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(saddr(dst)), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

// ---- 1. prep: grid (chunks, Hv) ----
template <int D>
constexpr size_t prep_smem_floats() {
  return 2 * static_cast<size_t>(kC) * (D + 4) + static_cast<size_t>(kC) * (kC + 4) + 3 * kC;
}

// Two blocks an SM (86 KB of shared memory at d 128): q's buffer takes v once q k^T is done.
template <int D, bool kSplit>
__global__ void __launch_bounds__(kThreads, 2) gdn_prep_kernel(DeltaRuleArgs a, Scratch s) {
  constexpr int LD = D + 4, LA = kC + 4;
  extern __shared__ float4 sm4[];
  float* Ks = reinterpret_cast<float*>(sm4);  // [kC][LD] k, then w
  float* Qs = Ks + kC * LD;                   // [kC][LD] q, then v, then u
  float* Vs = Qs;
  float* As = Qs + kC * LD;                   // [kC][LA] A (strictly lower)
  float* Gs = As + kC * LA;                   // [kC] G
  float* Bs = Gs + kC;                        // [kC] beta
  float* Es = Bs + kC;                        // [kC] beta e^G
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, g = lane >> 2, q = lane & 3;
  const int c = blockIdx.x, h = blockIdx.y, hk = h % a.n_k_heads, Hv = a.n_v_heads;
  const int64_t c0 = static_cast<int64_t>(c) * kC;
  const int L = a.n - c0 < kC ? static_cast<int>(a.n - c0) : kC;
  for (int e = tid; e < kC * (D / 4); e += kThreads) {  // every load in flight at once (zeros past L)
    const int t = e / (D / 4), i = (e % (D / 4)) * 4;
    const int64_t row = c0 + t;
    const bool in = t < L;
    cp16(Ks + t * LD + i, in ? a.k + row * a.k_stride + static_cast<int64_t>(hk) * D + i : a.k, in);
    cp16(Qs + t * LD + i, in ? a.q + row * a.q_stride + static_cast<int64_t>(hk) * D + i : a.q, in);
  }
  cp_commit();
  if (wid == 0) {  // G: inclusive prefix sum of g over the chunk (0 past L), by one warp
    float g0 = lane < L ? a.g[(c0 + lane) * a.g_stride + h] : 0.0f;
    float g1 = lane + 32 < L ? a.g[(c0 + lane + 32) * a.g_stride + h] : 0.0f;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const float u0 = __shfl_up_sync(0xffffffffu, g0, off), u1 = __shfl_up_sync(0xffffffffu, g1, off);
      if (lane >= off) g0 += u0, g1 += u1;
    }
    g1 += __shfl_sync(0xffffffffu, g0, 31);
    const float b0 = lane < L ? a.beta[(c0 + lane) * a.beta_stride + h] : 0.0f;
    const float b1 = lane + 32 < L ? a.beta[(c0 + lane + 32) * a.beta_stride + h] : 0.0f;
    Gs[lane] = g0, Gs[lane + 32] = g1;
    Bs[lane] = b0, Bs[lane + 32] = b1;
    Es[lane] = b0 * expf(g0), Es[lane + 32] = b1 * expf(g1);
    s.G[static_cast<int64_t>(h) * s.npad + c0 + lane] = g0;
    s.G[static_cast<int64_t>(h) * s.npad + c0 + lane + 32] = g1;
  }
  cp_wait<0>();
  __syncthreads();
  {  // warps 0-3: A = k k^T, warps 4-7: q k^T, 16 rows t each (tiles above the diagonal skipped)
    const int prod = wid >> 2, mt = wid & 3, nt_n = 2 * mt + 2;
    float acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    warp_mma<8, kSplit>(acc, (prod ? Qs : Ks) + mt * 16 * LD, LD, 1, Ks, 1, LD, 0, D, nt_n);
    __syncthreads();  // q read by every warp: v's loads into its buffer overlap the epilogue
    for (int e = tid; e < kC * (D / 4); e += kThreads) {
      const int t = e / (D / 4), i = (e % (D / 4)) * 4;
      const bool in = t < L;
      cp16(Vs + t * LD + i, in ? a.v + (c0 + t) * a.v_stride + static_cast<int64_t>(h) * D + i : a.v, in);
    }
    cp_commit();
    float* qk = s.QK + (static_cast<int64_t>(c) * Hv + h) * kC * kC;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int t = mt * 16 + g + (r >> 1) * 8, sc = nt * 8 + 2 * q + (r & 1);
        const float val = nt < nt_n ? acc[nt][r] : 0.0f;
        if (prod == 0) {
          As[t * LA + sc] = sc < t ? Bs[t] * expf(Gs[t] - Gs[sc]) * val : 0.0f;
        } else {
          qk[t * kC + sc] = sc <= t ? expf(Gs[t] - Gs[sc]) * val * a.scale : 0.0f;
        }
      }
    }
  }
  cp_wait<0>();
  __syncthreads();
  // (I + A) x = r for the 2d columns r = beta e^G k (-> w) and beta v (-> u), a column a thread
  // (forward substitution in f32, x in registers), in place.
  for (int col = tid; col < 2 * D; col += kThreads) {
    float* cp = col < D ? Ks + col : Vs + (col - D);
    const float* f = col < D ? Es : Bs;
    float x[kC];
#pragma unroll
    for (int t = 0; t < kC; ++t) {
      const float* ar = As + t * LA;
      float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
#pragma unroll
      for (int s4 = 0; s4 + 4 <= t; s4 += 4) {
        const float4 av = ld4(ar + s4);
        p0 = fmaf(av.x, x[s4], p0);
        p1 = fmaf(av.y, x[s4 + 1], p1);
        p2 = fmaf(av.z, x[s4 + 2], p2);
        p3 = fmaf(av.w, x[s4 + 3], p3);
      }
#pragma unroll
      for (int s1 = t & ~3; s1 < t; ++s1) p0 = fmaf(ar[s1], x[s1], p0);
      x[t] = cp[t * LD] * f[t] - ((p0 + p1) + (p2 + p3));
    }
#pragma unroll
    for (int t = 0; t < kC; ++t) cp[t * LD] = x[t];
  }
  __syncthreads();
  for (int e = tid; e < kC * (D / 4); e += kThreads) {
    const int t = e / (D / 4), i = (e % (D / 4)) * 4;
    const int64_t o = ((c0 + t) * Hv + h) * D + i;
    st4(s.W + o, ld4(Ks + t * LD + i));
    st4(s.U + o, ld4(Vs + t * LD + i));
  }
}

// ---- 2. state: grid (D / BV, Hv), sequential over the chunks ----
template <int D, int BV>
constexpr size_t state_smem_floats() {
  return 2 * static_cast<size_t>(kC) * ((D + 4) + (D + 8) + (BV + 4) + 1) + static_cast<size_t>(BV) * (D + 4) +
         static_cast<size_t>(kC) * (BV + 8);
}

template <int D, int BV, bool kSplit>
__global__ void __launch_bounds__(kThreads, 1) gdn_state_kernel(DeltaRuleArgs a, Scratch s) {
  constexpr int LDW = D + 4, LDK = D + 8, LDU = BV + 4, LDH = D + 4, LDV = BV + 8;
  constexpr int MT = D / 16;           // m-tiles (16 rows i) of the state slice S^T [D][BV]
  constexpr int NTH = BV * D / 1024;   // its n-tiles a warp: 8 warps = MT x BV / (8 NTH)
  constexpr int NV = BV / 16;          // vnew [kC][BV]: 4 m-tiles x 2 groups of NV n-tiles
  static_assert(NTH >= 1 && MT * (BV / (8 * NTH)) == 8 && NV >= 1, "tiling of the state kernel");
  extern __shared__ float4 sm4[];
  float* Wb = reinterpret_cast<float*>(sm4);  // [2][kC][LDW] w
  float* Kb = Wb + 2 * kC * LDW;              // [2][kC][LDK] k
  float* Ub = Kb + 2 * kC * LDK;              // [2][kC][LDU] u (the block's BV columns)
  float* Gb = Ub + 2 * kC * LDU;              // [2][kC] G
  float* Hs = Gb + 2 * kC;                    // [BV][LDH] the state slice S_c (rows j, cols i)
  float* Vn = Hs + BV * LDH;                  // [kC][LDV] e^{G_last - G_t} vnew_t
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, g = lane >> 2, q = lane & 3;
  const int h = blockIdx.y, j0 = blockIdx.x * BV, hk = h % a.n_k_heads, Hv = a.n_v_heads;
  float* state = a.state + (static_cast<int64_t>(h) * D + j0) * D;
  for (int e = tid; e < BV * (D / 4); e += kThreads) {
    const int j = e / (D / 4), i = (e % (D / 4)) * 4;
    st4(Hs + j * LDH + i, ld4(state + j * D + i));
  }
  auto load = [&](int c, int b) {
    const int64_t r0 = static_cast<int64_t>(c) * kC;
    float* W = Wb + b * kC * LDW;
    float* K = Kb + b * kC * LDK;
    float* U = Ub + b * kC * LDU;
    for (int e = tid; e < kC * (D / 4); e += kThreads) {
      const int t = e / (D / 4), i = (e % (D / 4)) * 4;
      const int64_t row = r0 + t;
      cp16(W + t * LDW + i, s.W + (row * Hv + h) * D + i, true);
      const bool in = row < a.n;
      cp16(K + t * LDK + i, in ? a.k + row * a.k_stride + static_cast<int64_t>(hk) * D + i : a.k, in);
    }
    for (int e = tid; e < kC * (BV / 4); e += kThreads) {
      const int t = e / (BV / 4), jj = (e % (BV / 4)) * 4;
      cp16(U + t * LDU + jj, s.U + ((r0 + t) * Hv + h) * D + j0 + jj, true);
    }
    if (tid < kC / 4) cp16(Gb + b * kC + 4 * tid, s.G + static_cast<int64_t>(h) * s.npad + r0 + 4 * tid, true);
    cp_commit();
  };
  load(0, 0);
  __syncthreads();  // Hs
  const int hm = wid % MT, hn = wid / MT;
  float acc_h[NTH][4];  // S^T rows i = 16 hm + g (+8), cols j = 8 (NTH hn + nt) + 2q (+1)
#pragma unroll
  for (int nt = 0; nt < NTH; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      acc_h[nt][r] = Hs[(8 * (NTH * hn + nt) + 2 * q + (r & 1)) * LDH + 16 * hm + g + (r >> 1) * 8];
  const int vm = wid & 3, vg = wid >> 2;
  for (int c = 0; c < s.nc; ++c) {
    const int b = c & 1;
    if (c + 1 < s.nc) {
      load(c + 1, b ^ 1);
      cp_wait<1>();
    } else {
      cp_wait<0>();
    }
    __syncthreads();  // chunk c's w, k, u, G landed; Hs = S_c
    const float* W = Wb + b * kC * LDW;
    const float* K = Kb + b * kC * LDK;
    const float* U = Ub + b * kC * LDU;
    const float* Gc = Gb + b * kC;
    float* hs_out = s.HS + ((static_cast<int64_t>(c) * Hv + h) * D + j0) * D;
    for (int e = tid; e < BV * (D / 4); e += kThreads) {
      const int j = e / (D / 4), i = (e % (D / 4)) * 4;
      st4(hs_out + j * D + i, ld4(Hs + j * LDH + i));
    }
    // vnew = u - w S_c^T: rows t = 16 vm + ..., cols j = 8 (NV vg + nt) + ...
    float acc_v[NV][4];
#pragma unroll
    for (int nt = 0; nt < NV; ++nt) acc_v[nt][0] = acc_v[nt][1] = acc_v[nt][2] = acc_v[nt][3] = 0.0f;
    warp_mma<NV, kSplit>(acc_v, W + vm * 16 * LDW, LDW, 1, Hs + vg * NV * 8 * LDH, 1, LDH, 0, D);
    const float Gl = Gc[kC - 1];
#pragma unroll
    for (int nt = 0; nt < NV; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; r += 2) {
        const int t = vm * 16 + g + (r >> 1) * 8, jj = (vg * NV + nt) * 8 + 2 * q;
        const float v0 = U[t * LDU + jj] - acc_v[nt][r], v1 = U[t * LDU + jj + 1] - acc_v[nt][r + 1];
        *reinterpret_cast<float2*>(s.VN + ((static_cast<int64_t>(c) * kC + t) * Hv + h) * D + j0 + jj) =
            make_float2(v0, v1);
        const float dec = expf(Gl - Gc[t]);
        Vn[t * LDV + jj] = v0 * dec;
        Vn[t * LDV + jj + 1] = v1 * dec;
      }
    }
    __syncthreads();  // Vn complete; every read of Hs done
    const float el = expf(Gl);
#pragma unroll
    for (int nt = 0; nt < NTH; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc_h[nt][r] *= el;
    // S^T += k^T (e^{G_last - G} vnew): A(m = i, k = t) = K[t][i], B(k = t, n = j) = Vn[t][j]
    warp_mma<NTH, kSplit>(acc_h, K + hm * 16, 1, LDK, Vn + hn * NTH * 8, LDV, 1, 0, kC);
#pragma unroll
    for (int nt = 0; nt < NTH; ++nt)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        Hs[(8 * (NTH * hn + nt) + 2 * q + (r & 1)) * LDH + 16 * hm + g + (r >> 1) * 8] = acc_h[nt][r];
    __syncthreads();  // Hs = S_{c+1}; buffer b free for the load of chunk c + 2
  }
  for (int e = tid; e < BV * (D / 4); e += kThreads) {
    const int j = e / (D / 4), i = (e % (D / 4)) * 4;
    st4(state + j * D + i, ld4(Hs + j * LDH + i));
  }
}

// ---- 3. out: grid (chunks, Hv, D / BO) ----
template <int D, int BO>
constexpr size_t out_smem_floats() {
  return static_cast<size_t>(kC) * (D + 4) + static_cast<size_t>(BO) * (D + 4) + static_cast<size_t>(kC) * (kC + 4) +
         static_cast<size_t>(kC) * (BO + 8) + kC;
}

template <int D, int BO, bool kSplit>
__global__ void __launch_bounds__(kThreads, 2) gdn_out_kernel(DeltaRuleArgs a, Scratch s) {
  constexpr int LDQ = D + 4, LDH = D + 4, LDQK = kC + 4, LDV = BO + 8, NT = BO / 16;
  extern __shared__ float4 sm4[];
  float* Qs = reinterpret_cast<float*>(sm4);  // [kC][LDQ] q
  float* Hs = Qs + kC * LDQ;                  // [BO][LDH] S_c rows j0 .. j0 + BO
  float* QKs = Hs + BO * LDH;                 // [kC][LDQK]
  float* Vs = QKs + kC * LDQK;                // [kC][LDV] vnew
  float* Gs = Vs + kC * LDV;                  // [kC]
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, g = lane >> 2, q = lane & 3;
  const int c = blockIdx.x, h = blockIdx.y, j0 = blockIdx.z * BO, hk = h % a.n_k_heads, Hv = a.n_v_heads;
  const int64_t c0 = static_cast<int64_t>(c) * kC;
  const int L = a.n - c0 < kC ? static_cast<int>(a.n - c0) : kC;
  for (int e = tid; e < kC * (D / 4); e += kThreads) {  // every load in flight at once (zeros past L)
    const int t = e / (D / 4), i = (e % (D / 4)) * 4;
    const bool in = t < L;
    cp16(Qs + t * LDQ + i, in ? a.q + (c0 + t) * a.q_stride + static_cast<int64_t>(hk) * D + i : a.q, in);
  }
  const float* hs = s.HS + ((static_cast<int64_t>(c) * Hv + h) * D + j0) * D;
  for (int e = tid; e < BO * (D / 4); e += kThreads) {
    const int j = e / (D / 4), i = (e % (D / 4)) * 4;
    cp16(Hs + j * LDH + i, hs + j * D + i, true);
  }
  const float* qk = s.QK + (static_cast<int64_t>(c) * Hv + h) * kC * kC;
  for (int e = tid; e < kC * (kC / 4); e += kThreads) {
    const int t = e / (kC / 4), sc = (e % (kC / 4)) * 4;
    cp16(QKs + t * LDQK + sc, qk + t * kC + sc, true);
  }
  for (int e = tid; e < kC * (BO / 4); e += kThreads) {
    const int t = e / (BO / 4), jj = (e % (BO / 4)) * 4;
    cp16(Vs + t * LDV + jj, s.VN + ((c0 + t) * Hv + h) * D + j0 + jj, true);
  }
  if (tid < kC / 4) cp16(Gs + 4 * tid, s.G + static_cast<int64_t>(h) * s.npad + c0 + 4 * tid, true);
  cp_commit();
  cp_wait<0>();
  __syncthreads();
  const int mt = wid & 3, ng = wid >> 2;
  float acc1[NT][4], acc2[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc1[nt][r] = acc2[nt][r] = 0.0f;
  warp_mma<NT, kSplit>(acc1, Qs + mt * 16 * LDQ, LDQ, 1, Hs + ng * NT * 8 * LDH, 1, LDH, 0, D);
  warp_mma<NT, kSplit>(acc2, QKs + mt * 16 * LDQK, LDQK, 1, Vs + ng * NT * 8, LDV, 1, 0, 16 * mt + 16);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int r = 0; r < 4; r += 2) {
      const int t = mt * 16 + g + (r >> 1) * 8, jj = (ng * NT + nt) * 8 + 2 * q;
      if (t >= L) continue;
      const float e = a.scale * expf(Gs[t]);
      *reinterpret_cast<float2*>(a.out + (c0 + t) * a.out_stride + static_cast<int64_t>(h) * D + j0 + jj) =
          make_float2(fmaf(e, acc1[nt][r], acc2[nt][r]), fmaf(e, acc1[nt][r + 1], acc2[nt][r + 1]));
    }
  }
}

template <class K>
void set_smem(K kernel, size_t floats, const char* what) {
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(floats * sizeof(float))),
             what);
}

template <int D, int BV, bool kSplit>
void launch_all(const DeltaRuleArgs& a, const Scratch& sc, int phases, cudaStream_t s) {
  constexpr int BO = D < 64 ? D : 64;
  const size_t f1 = prep_smem_floats<D>(), f2 = state_smem_floats<D, BV>(), f3 = out_smem_floats<D, BO>();
  set_smem(gdn_prep_kernel<D, kSplit>, f1, "gated_delta_rule_chunked_tc: prep shared memory");
  set_smem(gdn_state_kernel<D, BV, kSplit>, f2, "gated_delta_rule_chunked_tc: state shared memory");
  set_smem(gdn_out_kernel<D, BO, kSplit>, f3, "gated_delta_rule_chunked_tc: out shared memory");
  const auto hv = static_cast<unsigned>(a.n_v_heads), nc = static_cast<unsigned>(sc.nc);
  if (phases & 1) {
    gdn_prep_kernel<D, kSplit><<<dim3(nc, hv), kThreads, f1 * sizeof(float), s>>>(a, sc);
    launch_check("gated_delta_rule_chunked_tc prep");
  }
  if (phases & 2) {
    gdn_state_kernel<D, BV, kSplit><<<dim3(D / BV, hv), kThreads, f2 * sizeof(float), s>>>(a, sc);
    launch_check("gated_delta_rule_chunked_tc state");
  }
  if (phases & 4) {
    gdn_out_kernel<D, BO, kSplit><<<dim3(nc, hv, D / BO), kThreads, f3 * sizeof(float), s>>>(a, sc);
    launch_check("gated_delta_rule_chunked_tc out");
  }
}

template <int D, bool kSplit>
void launch_d(const DeltaRuleArgs& a, const Scratch& sc, int bv, int ph, cudaStream_t s) {
  if constexpr (D == 32) {
    launch_all<D, 32, kSplit>(a, sc, ph, s);
  } else {
    switch (bv) {
      case 16: launch_all<D, 16, kSplit>(a, sc, ph, s); break;
      case 32: launch_all<D, 32, kSplit>(a, sc, ph, s); break;
      case 64: launch_all<D, 64, kSplit>(a, sc, ph, s); break;
      default: throw Error("cuda gated_delta_rule_chunked_tc: state slice " + std::to_string(bv) + " is not 16, 32 or 64");
    }
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool delta_rule_chunked_tc_supported(const DeltaRuleArgs& a) {
  return (a.d == 32 || a.d == 64 || a.d == 128) && a.n_k_heads > 0 && a.n_v_heads % a.n_k_heads == 0 &&
         aligned16(a.q) && aligned16(a.k) && aligned16(a.v) && aligned16(a.state) && a.q_stride % 4 == 0 &&
         a.k_stride % 4 == 0 && a.v_stride % 4 == 0 && a.out_stride % 2 == 0 &&
         (reinterpret_cast<uintptr_t>(a.out) & 7u) == 0 && !(a.snapshots && a.n_snapshots > 0);
}

size_t delta_rule_chunked_tc_scratch_bytes(int64_t n, int32_t n_v_heads, int32_t d) {
  const int64_t nc = chunks(n), npad = nc * kC, hv = n_v_heads;
  const int64_t floats = hv * npad + 3 * npad * hv * d + nc * hv * kC * kC + nc * hv * d * d;
  return static_cast<size_t>(floats) * sizeof(float);
}

int delta_rule_chunked_tc_default_slice(int32_t d, int32_t n_v_heads, int n_sms) {
  if (d <= 32) return 32;
  // Blocks of the state kernel are d / bv * Hv, one an SM (its shared memory), each loading the
  // whole of w and k for any slice: the smallest slice whose blocks fit in one wave, else 64.
  // On the H200 (132 SMs, run 2 of helper gdnpre) the fastest slice measured was 32 for 32
  // heads of 128, 64 for 48 heads of 128, 16 for 4 heads of 64: this rule's picks.
  for (int bv : {16, 32, 64})
    if (bv <= d && static_cast<int64_t>(d / bv) * n_v_heads <= n_sms) return bv;
  return 64;
}

void launch_gated_delta_rule_chunked_tc_phases(const DeltaRuleArgs& a, void* scratch, bool split, int bv, int ph,
                                               cudaStream_t s) {
  if (!delta_rule_chunked_tc_supported(a))
    throw Error("cuda gated_delta_rule_chunked_tc: head size " + std::to_string(a.d) +
                " (32, 64 or 128), alignment or snapshots not supported");
  if (!scratch || !aligned16(scratch)) throw Error("cuda gated_delta_rule_chunked_tc: scratch null or misaligned");
  if (a.n <= 0) return;
  if (bv <= 0) {
    int dev = 0, sms = 132;
    cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
    bv = delta_rule_chunked_tc_default_slice(a.d, a.n_v_heads, sms);
  }
  const Scratch sc = carve(scratch, a.n, a.n_v_heads, a.d);
  switch (a.d) {
    case 32: split ? launch_d<32, true>(a, sc, bv, ph, s) : launch_d<32, false>(a, sc, bv, ph, s); break;
    case 64: split ? launch_d<64, true>(a, sc, bv, ph, s) : launch_d<64, false>(a, sc, bv, ph, s); break;
    default: split ? launch_d<128, true>(a, sc, bv, ph, s) : launch_d<128, false>(a, sc, bv, ph, s); break;
  }
}

void launch_gated_delta_rule_chunked_tc(const DeltaRuleArgs& a, void* scratch, bool split, int bv, cudaStream_t s) {
  launch_gated_delta_rule_chunked_tc_phases(a, scratch, split, bv, 7, s);
}

}  // namespace df::cuda
