#include "backend/cuda/ops/delta_rule_chunked.cuh"

#include "backend/cuda/cuda_check.h"

namespace df::cuda {
namespace {

constexpr int kC = 64;        // tokens per chunk
constexpr int kR = 32;        // state rows per block
constexpr int kThreads = 256;

// Shared memory (floats): S [kR][D+1], K, Q [kC][D+1], V, Dl, Sk, Sq [kC][kR+1], A, QK [kC][kC+1], G, B [kC].
template <int D>
constexpr size_t smem_floats() {
  return static_cast<size_t>(kR) * (D + 1) + 2 * static_cast<size_t>(kC) * (D + 1) + 4 * kC * (kR + 1) +
         2 * kC * (kC + 1) + 2 * kC;
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) delta_rule_chunked_kernel(DeltaRuleArgs a) {
  constexpr int LD = D + 1, LR = kR + 1, LC = kC + 1;
  extern __shared__ float sm[];
  float* S = sm;                 // [kR][LD]
  float* K = S + kR * LD;        // [kC][LD]
  float* Q = K + kC * LD;        // [kC][LD]
  float* V = Q + kC * LD;        // [kC][LR]
  float* Dl = V + kC * LR;       // [kC][LR] delta
  float* Sk = Dl + kC * LR;      // [kC][LR] (S0 k_t)_r
  float* Sq = Sk + kC * LR;      // [kC][LR] (S0 q_t)_r
  float* A = Sq + kC * LR;       // [kC][LC]
  float* QK = A + kC * LC;       // [kC][LC]
  float* G = QK + kC * LC;       // [kC]
  float* B = G + kC;             // [kC]
  const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
  const int h = blockIdx.y, j0 = blockIdx.x * kR;
  const int hk = h % a.n_k_heads;
  float* state = a.state + (static_cast<int64_t>(h) * D + j0) * D;  // rows j0 .. j0 + kR - 1

  for (int e = tid; e < kR * D; e += kThreads) S[(e / D) * LD + e % D] = state[e];

  for (int64_t c0 = 0; c0 < a.n; c0 += kC) {
    const int L = a.n - c0 < kC ? static_cast<int>(a.n - c0) : kC;
    __syncthreads();  // the previous chunk is done with K, Q, V, G, B
    for (int e = tid; e < kC * D; e += kThreads) {
      const int t = e / D, i = e % D;
      const bool in = t < L;
      const int64_t row = c0 + t;
      K[t * LD + i] = in ? a.k[row * a.k_stride + static_cast<int64_t>(hk) * D + i] : 0.0f;
      Q[t * LD + i] = in ? a.q[row * a.q_stride + static_cast<int64_t>(hk) * D + i] : 0.0f;
    }
    for (int e = tid; e < kC * kR; e += kThreads) {
      const int t = e / kR, r = e % kR;
      V[t * LR + r] = t < L ? a.v[(c0 + t) * a.v_stride + static_cast<int64_t>(h) * D + j0 + r] : 0.0f;
    }
    if (wid == 0) {  // G: inclusive prefix sum of g over the chunk (0 past L), by one warp
      float g0 = lane < L ? a.g[(c0 + lane) * a.g_stride + h] : 0.0f;
      float g1 = lane + 32 < L ? a.g[(c0 + lane + 32) * a.g_stride + h] : 0.0f;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const float u0 = __shfl_up_sync(0xffffffffu, g0, off), u1 = __shfl_up_sync(0xffffffffu, g1, off);
        if (lane >= off) g0 += u0, g1 += u1;
      }
      g1 += __shfl_sync(0xffffffffu, g0, 31);
      G[lane] = g0, G[lane + 32] = g1;
      B[lane] = lane < L ? a.beta[(c0 + lane) * a.beta_stride + h] : 0.0f;
      B[lane + 32] = lane + 32 < L ? a.beta[(c0 + lane + 32) * a.beta_stride + h] : 0.0f;
    }
    __syncthreads();
    {  // A[t][s] = beta_t e^{G_t - G_s} k_t.k_s (s < t), QK[t][s] = e^{G_t - G_s} q_t.k_s (s <= t)
      const int t = tid >> 2, s0 = tid & 3;
      float ak[16], aq[16];
#pragma unroll
      for (int m = 0; m < 16; ++m) ak[m] = aq[m] = 0.0f;
      for (int i = 0; i < D; ++i) {
        const float kt = K[t * LD + i], qt = Q[t * LD + i];
#pragma unroll
        for (int m = 0; m < 16; ++m) {
          const float ks = K[(s0 + 4 * m) * LD + i];
          ak[m] = fmaf(kt, ks, ak[m]);
          aq[m] = fmaf(qt, ks, aq[m]);
        }
      }
      const float Gt = G[t], bt = B[t];
#pragma unroll
      for (int m = 0; m < 16; ++m) {
        const int s = s0 + 4 * m;
        const float e = s <= t ? expf(Gt - G[s]) : 0.0f;
        A[t * LC + s] = s < t ? bt * e * ak[m] : 0.0f;
        QK[t * LC + s] = e * aq[m];
      }
    }
    {  // Sk[t][r] = S0[r] . k_t, Sq[t][r] = S0[r] . q_t
      const int r = lane;
      float sk[8], sq[8];
#pragma unroll
      for (int m = 0; m < 8; ++m) sk[m] = sq[m] = 0.0f;
      for (int i = 0; i < D; ++i) {
        const float sv = S[r * LD + i];
#pragma unroll
        for (int m = 0; m < 8; ++m) {
          const int t = wid + 8 * m;
          sk[m] = fmaf(sv, K[t * LD + i], sk[m]);
          sq[m] = fmaf(sv, Q[t * LD + i], sq[m]);
        }
      }
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int t = wid + 8 * m;
        Sk[t * LR + r] = sk[m];
        Sq[t * LR + r] = sq[m];
      }
    }
    __syncthreads();
    {  // forward substitution, row r by 8 lanes of one warp
      const int r = tid >> 3, sub = tid & 7;
      for (int t = 0; t < L; ++t) {
        float p = 0.0f;
        for (int s = sub; s < t; s += 8) p = fmaf(A[t * LC + s], Dl[s * LR + r], p);
        p += __shfl_xor_sync(0xffffffffu, p, 1);
        p += __shfl_xor_sync(0xffffffffu, p, 2);
        p += __shfl_xor_sync(0xffffffffu, p, 4);
        const float b = B[t] * (V[t * LR + r] - expf(G[t]) * Sk[t * LR + r]);
        if (sub == 0) Dl[t * LR + r] = b - p;
        __syncwarp();
      }
      for (int t = L + (sub == 0 ? 0 : kC); t < kC; ++t) Dl[t * LR + r] = 0.0f;  // padding rows
    }
    __syncthreads();
    {  // outputs of the chunk's tokens, then the state at its end
      const int r = lane;
#pragma unroll
      for (int m = 0; m < 8; ++m) {
        const int t = wid + 8 * m;
        if (t >= L) continue;
        float o = expf(G[t]) * Sq[t * LR + r];
        for (int s = 0; s <= t; ++s) o = fmaf(QK[t * LC + s], Dl[s * LR + r], o);
        a.out[(c0 + t) * a.out_stride + static_cast<int64_t>(h) * D + j0 + r] = o * a.scale;
      }
      const float Gl = G[kC - 1];
#pragma unroll
      for (int m = 0; m < 8; ++m) {  // Sk (free now) = e^{G_last - G_s} delta_s
        const int t = wid + 8 * m;
        Sk[t * LR + r] = expf(Gl - G[t]) * Dl[t * LR + r];
      }
      __syncthreads();
      const float el = expf(Gl);
      for (int i = wid; i < D; i += 8) {
        float acc = el * S[r * LD + i];
        for (int s = 0; s < L; ++s) acc = fmaf(Sk[s * LR + r], K[s * LD + i], acc);
        S[r * LD + i] = acc;
      }
    }
  }
  __syncthreads();
  for (int e = tid; e < kR * D; e += kThreads) state[e] = S[(e / D) * LD + e % D];
}

template <int D>
void launch_d(const DeltaRuleArgs& a, cudaStream_t s) {
  const size_t bytes = smem_floats<D>() * sizeof(float);
  cuda_check(cudaFuncSetAttribute(delta_rule_chunked_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             "gated_delta_rule_chunked: shared memory limit");
  const dim3 grid(static_cast<unsigned>(D / kR), static_cast<unsigned>(a.n_v_heads));
  delta_rule_chunked_kernel<D><<<grid, kThreads, bytes, s>>>(a);
  launch_check("gated_delta_rule_chunked");
}

}  // namespace

bool delta_rule_chunked_supported(int32_t d) { return d == 32 || d == 64 || d == 128; }

void launch_gated_delta_rule_chunked(const DeltaRuleArgs& a, cudaStream_t s) {
  if (a.snapshots && a.n_snapshots > 0) throw Error("cuda gated_delta_rule_chunked: no snapshots (use the token kernel)");
  if (a.n <= 0) return;
  switch (a.d) {
    case 32: launch_d<32>(a, s); break;
    case 64: launch_d<64>(a, s); break;
    case 128: launch_d<128>(a, s); break;
    default: throw Error("cuda gated_delta_rule_chunked: head size " + std::to_string(a.d) + " is not 32, 64 or 128");
  }
}

}  // namespace df::cuda
