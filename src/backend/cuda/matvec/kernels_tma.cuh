// The n = 1 int8-x matvec with its weights streamed into a shared-memory ring by the bulk copy
// engine (cp.async.bulk, "TMA"), for formats whose part is one 16-byte word and whose meta is a
// fixed number of bytes per block in one plane (Q4_0, Q8_0, Q4_K, Q5_K, IQ4_XS). MvFuse::tma_bytes
// > 0 selects it.
//
// Why: a decode step is ~250 dependent launches of 2-30 MB of weights each. mv_kernel keeps
// about 48 KB per block in flight in registers and fills the SMs with two blocks, so the next
// launch's blocks start only as this one's exit: every launch pays its x prologue, its tail and
// the DRAM ramp in series (workbench chain: 9.8 us a launch for 4B Q4_0, the read kernel 6.1).
// Here a launch takes one block per SM (half its registers and at most `tma_bytes` of shared
// memory), so the next launch's block is resident beside it: under PDL that block fills its
// whole ring (up to ~100 KB of its weights) before griddepcontrol.wait, while this launch still
// computes. The weights of a launch are then mostly in shared memory when its x is ready.
//
// Work and bits: the block's steps are those of mv_kernel's pipelined loop, (row group g =
// blockIdx.x + i gridDim.x, chunk c of cp parts), cp a multiple of the row's 32 wpr lanes; a
// step's bytes are the group's rows' quant words and meta of the chunk in a slot of the ring
// (one mbarrier per slot): where three slots of whole rows fit, a step is the group's whole rows,
// contiguous in each plane, one bulk copy per plane (per matrix of a SwiGLU pair); otherwise one
// bulk copy per row and plane of the chunk (small copies cost the copy engine: a first version
// with only those streamed a long matrix at ~800 GB/s on the H200). Lane rl of a row takes its parts
// t = rl, rl + 32 wpr, ... in ascending order, warp_sum, then the row's warps in warp order:
// mv_kernel's arithmetic, so every row has mv_kernel's bits (and so those of n = 2..8 rows).
#pragma once
#include <cstdint>

#include "backend/cuda/matvec/kernels_fast.cuh"

namespace df::cudamv {

constexpr int kTmaMaxSlots = 16;

// Whether format F (a dev_dp4a.cuh struct) takes the bulk-copy kernel: one 16-byte word per
// part, its meta kMetaBytes per block of kPartsPerBlock parts in one plane, read by F::meta_at
// (Q4_0, Q8_0, Q4_K, Q5_K, IQ4_XS).
template <class F>
constexpr bool tma_format() {
  if constexpr (requires(const uint8_t* b) { F::meta_at(b, 0); }) return int8x_of<F>() && F::kLoads == 1;
  else return false;
}

// The host's plan of a launch (launch_mv_tma): a slot holds rows_g rows' cp-part chunks, the
// quant words first (row i at i * q_bytes_row), then the meta (row i at rows_g * q_bytes_row +
// i * m_bytes_row).
struct TmaPlan {
  int cp = 0, nchunks = 0, slots = 0, slot_bytes = 0, q_bytes_row = 0, m_bytes_row = 0, rows_g = 0, x_bytes = 0;
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred P1;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n @!P1 bra WAIT_%=;\n}\n" ::"r"(
          smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// bytes (a multiple of 16; both addresses 16-byte aligned) from global to shared memory,
// completing on bar.
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

template <class F, int N>
__global__ void __launch_bounds__(kWarps * 32, 2)
    mv_tma_kernel(PlanarView v, const float* __restrict__ x, float* __restrict__ y, MvFuse f, int wpr, TmaPlan p) {
  constexpr int RW = 2;
  using Meta = typename F::Meta;
  extern __shared__ float4 smem4[];
  __shared__ __align__(8) uint64_t bars[kTmaMaxSlots];
  float* xs = reinterpret_cast<float*>(smem4);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem4) + p.x_bytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = warp % wpr, wg = warp / wpr, row_warps = kWarps / wpr;
  const int rl = sub * 32 + lane, rs = 32 * wpr;
  const int nparts = static_cast<int>(v.cols / F::kPartElems);
  const int stride = static_cast<int>(xs_stride(v.cols));
  const bool pair = f.swiglu;
  const int64_t per_group = pair ? row_warps : row_warps * RW;
  const int64_t g0 = (v.rows + per_group - 1) / per_group;
  const int64_t g1 = pair || f.nmat < 2 ? 0 : (f.rows[0] + per_group - 1) / per_group;
  const int64_t g2 = pair || f.nmat < 3 ? 0 : (f.rows[1] + per_group - 1) / per_group;
  const int64_t ngroups = g0 + g1 + g2;
  auto rows_of = [&](int m) { return m == 0 ? v.rows : m == 1 ? f.rows[0] : f.rows[1]; };
  auto q_of = [&](int m) { return m == 0 ? v.q : m == 1 ? f.q[0] : f.q[1]; };
  auto m_of = [&](int m) { return m == 0 ? v.m : m == 1 ? f.m[0] : f.m[1]; };
  auto group_of = [&](int64_t g, int& gm, int64_t& glg) {
    gm = g < g0 ? 0 : g < g0 + g1 ? 1 : 2;
    glg = gm == 0 ? g : gm == 1 ? g - g0 : g - g0 - g1;
  };
  const int64_t my_groups = blockIdx.x < ngroups ? (ngroups - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int64_t steps = my_groups * p.nchunks;

  // Step s into slot k (warp 0): lane 2 i + plane copies row i's chunk of that plane.
  auto issue = [&](int64_t s, int k) {
    const int64_t g = blockIdx.x + (s / p.nchunks) * gridDim.x;
    const int c = static_cast<int>(s % p.nchunks);
    int gm;
    int64_t glg;
    group_of(g, gm, glg);
    const int t0 = c * p.cp, pc = min(p.cp, nparts - t0);
    // bytes of a row's chunk in each plane (whole rows: the planes' row bytes)
    const uint32_t qb = p.nchunks == 1 ? static_cast<uint32_t>(v.q_row_bytes) : static_cast<uint32_t>(pc) * 16u;
    const uint32_t mb = p.nchunks == 1 ? static_cast<uint32_t>(v.m_row_bytes)
                                       : static_cast<uint32_t>((pc + F::kPartsPerBlock - 1) / F::kPartsPerBlock * F::kMetaBytes);
    int64_t r0, valid;  // the group's first row (per matrix) and its rows inside the matrix
    if (pair) {
      r0 = glg * row_warps;
      valid = min(static_cast<int64_t>(row_warps), v.rows - r0);
    } else {
      r0 = glg * row_warps * RW;
      valid = min(static_cast<int64_t>(row_warps * RW), rows_of(gm) - r0);
    }
    const uint32_t total = static_cast<uint32_t>((pair ? 2 : 1) * valid) * (qb + mb);
    if (lane == 0) mbar_expect(&bars[k], total);
    __syncwarp();
    uint8_t* slot = ring + static_cast<int64_t>(k) * p.slot_bytes;
    if (p.nchunks == 1) {  // whole rows: the group's rows are contiguous in each plane, one copy per plane
      if (lane < (pair ? 4 : 2)) {
        const int mtx = lane >> 1, plane = lane & 1;  // mtx 1: the pair's up rows
        const uint8_t* qbase = pair ? (mtx == 0 ? v.q : f.q[0]) : q_of(gm);
        const uint8_t* mbase = pair ? (mtx == 0 ? v.m : f.m[0]) : m_of(gm);
        const int i0 = mtx * row_warps;  // the first slot row
        if (plane == 0)
          bulk_copy(slot + i0 * p.q_bytes_row, qbase + r0 * v.q_row_bytes, static_cast<uint32_t>(valid) * qb, &bars[k]);
        else
          bulk_copy(slot + p.rows_g * p.q_bytes_row + i0 * p.m_bytes_row, mbase + r0 * v.m_row_bytes,
                    static_cast<uint32_t>(valid) * mb, &bars[k]);
      }
      return;
    }
    const int i = lane >> 1, plane = lane & 1;
    if (i < p.rows_g) {
      int64_t row;
      const uint8_t *qbase, *mbase;
      if (pair) {
        row = r0 + (i % row_warps);
        qbase = i < row_warps ? v.q : f.q[0];
        mbase = i < row_warps ? v.m : f.m[0];
      } else {
        row = r0 + i;
        qbase = q_of(gm), mbase = m_of(gm);
      }
      if (row - r0 < valid) {
        if (plane == 0)
          bulk_copy(slot + i * p.q_bytes_row, qbase + row * v.q_row_bytes + static_cast<int64_t>(t0) * 16, qb, &bars[k]);
        else
          bulk_copy(slot + p.rows_g * p.q_bytes_row + i * p.m_bytes_row,
                    mbase + row * v.m_row_bytes + static_cast<int64_t>(t0 / F::kPartsPerBlock) * F::kMetaBytes, mb,
                    &bars[k]);
      }
    }
  };

  if (threadIdx.x == 0) {
    for (int k = 0; k < p.slots; ++k) mbar_init(&bars[k]);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0)
    for (int64_t s = 0; s < p.slots && s < steps; ++s) issue(s, static_cast<int>(s));
  // Weights only above: under PDL they stream while the previous kernel runs.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  uint8_t* xq = reinterpret_cast<uint8_t*>(smem4) + (f.norm_w ? 4 * N * stride : 0);
  const int xq_rb = static_cast<int>(xq_row_bytes(v.cols));
  int8x_prologue<PlanarAdapter<F>, N>(xs, xq, x, static_cast<int>(v.cols), stride, f);

  float acc[RW][N];
#pragma unroll
  for (int r = 0; r < RW; ++r)
#pragma unroll
    for (int j = 0; j < N; ++j) acc[r][j] = 0.0f;
  for (int64_t s = 0; s < steps; ++s) {
    const int k = static_cast<int>(s % p.slots);
    const int64_t g = blockIdx.x + (s / p.nchunks) * gridDim.x;
    const int c = static_cast<int>(s % p.nchunks);
    const int t0 = c * p.cp, pc = min(p.cp, nparts - t0);
    mbar_wait(&bars[k], static_cast<uint32_t>((s / p.slots) & 1));
    const uint8_t* slot = ring + static_cast<int64_t>(k) * p.slot_bytes;
    for (int tl = rl; tl < pc; tl += rs) {
      const int t = t0 + tl;
      const int e0 = t * F::kPartElems;
      const XQ xa{xq + t * 16, xq + v.cols + (e0 / 32) * 8, xq_rb, nparts * 16};
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int i = pair ? (r == 0 ? wg : row_warps + wg) : wg * RW + r;  // the row's place in the slot
        const uint4 q[1] = {*reinterpret_cast<const uint4*>(slot + i * p.q_bytes_row + tl * 16)};
        const Meta mt = F::meta_at(
            slot + p.rows_g * p.q_bytes_row + i * p.m_bytes_row + (tl / F::kPartsPerBlock) * F::kMetaBytes, t);
        F::template dot<N>(q, mt, xa, acc[r]);
      }
    }
    if (c == p.nchunks - 1) {  // the group's rows: sums and stores (mv_kernel's finish)
      int gm;
      int64_t glg;
      group_of(g, gm, glg);
      float res[RW][N];
#pragma unroll
      for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int j = 0; j < N; ++j) res[r][j] = warp_sum(acc[r][j]), acc[r][j] = 0.0f;
      if (wpr > 1) {
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
      }
      if (lane == 0 && sub == 0) {
        if (pair) {
          const int64_t row = glg * row_warps + wg;
          if (row < v.rows)
#pragma unroll
            for (int j = 0; j < N; ++j) y[j * v.rows + row] = swiglu_of(res[0][j], res[RW - 1][j]);
        } else {
          const int64_t rows = rows_of(gm);
          float* ym = gm == 0 ? y : gm == 1 ? f.y[0] : f.y[1];
          const MvEpi ep = gm == 0 ? f.epi[0] : gm == 1 ? f.epi[1] : f.epi[2];
#pragma unroll
          for (int r = 0; r < RW; ++r) {
            const int64_t row = (glg * row_warps + wg) * RW + r;
            if (row < rows)
#pragma unroll
              for (int j = 0; j < N; ++j) store_out(ep, res[r][j], ym + j * rows + row, row);
          }
        }
      }
    }
    __syncthreads();  // every warp is done with slot k (and with red)
    if (warp == 0 && s + p.slots < steps) issue(s + p.slots, k);
  }
}

// The plan of a launch of mv_tma_kernel for (F, N) with the fusions of f (not routed experts):
// false where the shapes do not allow it (16-byte aligned chunks, a ring of at least two slots in
// f.tma_bytes of shared memory beside the x copy). wpr: mv_wpr of the launch; blocks: its grid.
template <class F, int N>
bool plan_mv_tma(const PlanarView& v, const MvFuse& f, TmaPlan& p, int& wpr, int64_t& blocks) {
  if constexpr (!tma_format<F>()) {
    return false;
  } else {
    constexpr int RW = 2;
    if (f.ids || f.stage_x || f.tma_bytes <= 0 || f.nmat < 1 || f.nmat > 3 || (f.swiglu && f.nmat != 2)) return false;
    if (v.m_row_bytes % 16 != 0 || v.q_row_bytes % 16 != 0 || v.cols % F::kPartElems != 0) return false;
    const int nparts = static_cast<int>(v.cols / F::kPartElems);
    int64_t units = f.swiglu ? 2 * v.rows : v.rows;
    for (int i = 0; !f.swiglu && i + 1 < f.nmat; ++i) units += f.rows[i];
    wpr = mv_wpr(units, nparts);
    const int row_warps = kWarps / wpr, rs = 32 * wpr;
    const int64_t per_group = f.swiglu ? row_warps : row_warps * RW;
    int64_t ngroups = (v.rows + per_group - 1) / per_group;
    for (int i = 0; !f.swiglu && i + 1 < f.nmat; ++i) ngroups += (f.rows[i] + per_group - 1) / per_group;
    p.rows_g = f.swiglu ? 2 * row_warps : row_warps * RW;
    p.x_bytes = static_cast<int>((xq_bytes(N, v.cols, f.norm_w != nullptr) + 127) / 128 * 128);
    const int64_t ring = f.tma_bytes - p.x_bytes;
    auto meta_bytes = [](int parts) { return (parts + F::kPartsPerBlock - 1) / F::kPartsPerBlock * F::kMetaBytes; };
    auto slot_of = [&](int cp) { return p.rows_g * (cp * 16 + (meta_bytes(cp) + 15) / 16 * 16); };
    const int64_t whole = static_cast<int64_t>(p.rows_g) * static_cast<int64_t>(v.q_row_bytes + v.m_row_bytes);
    if (3 * whole <= ring) {
      // whole rows a step (one bulk copy per plane and matrix): the slot's rows at the planes' row bytes
      p.cp = (nparts + rs - 1) / rs * rs;
      p.nchunks = 1;
      p.q_bytes_row = static_cast<int>(v.q_row_bytes);
      p.m_bytes_row = static_cast<int>(v.m_row_bytes);
      p.slot_bytes = static_cast<int>(whole);
    } else {
      // chunks of k rs parts (one bulk copy per row and plane), k as large as leaves four slots
      const int kmax = (nparts + rs - 1) / rs;
      int k = 1;
      while (k < kmax && 4 * static_cast<int64_t>(slot_of((k + 1) * rs)) <= ring) ++k;
      p.cp = k * rs;
      p.nchunks = (nparts + p.cp - 1) / p.cp;
      // every chunk's meta starts and ends on 16 bytes
      if (meta_bytes(p.cp) % 16 != 0 && p.nchunks > 1) return false;
      if (meta_bytes(nparts - (p.nchunks - 1) * p.cp) % 16 != 0) return false;
      p.q_bytes_row = p.cp * 16;
      p.m_bytes_row = (meta_bytes(p.cp) + 15) / 16 * 16;
      p.slot_bytes = slot_of(p.cp);
    }
    p.slots = static_cast<int>(std::min<int64_t>(kTmaMaxSlots, ring / p.slot_bytes));
    if (p.slots < 2) return false;
    int dev = 0, sms = 1;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int per_sm = f.blocks_per_sm > 0 ? f.blocks_per_sm : 1;
    blocks = std::min<int64_t>(ngroups, int64_t{sms} * per_sm);
    return true;
  }
}

// Launches mv_tma_kernel for (F, N) where plan_mv_tma allows it; false: nothing launched.
template <class F, int N>
bool launch_mv_tma(const PlanarView& v, const float* x, float* y, const MvFuse& f, cudaStream_t s) {
  TmaPlan p;
  int wpr = 1;
  int64_t blocks = 0;
  if (!plan_mv_tma<F, N>(v, f, p, wpr, blocks)) return false;
  if constexpr (tma_format<F>()) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks));
    cfg.blockDim = dim3(kWarps * 32);
    cfg.dynamicSmemBytes = static_cast<size_t>(p.x_bytes) + static_cast<size_t>(p.slots) * p.slot_bytes;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = f.pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, mv_tma_kernel<F, N>, v, x, y, f, wpr, p);
  }
  return true;
}

// The largest shared memory a launch of mv_tma_kernel may take (called once per Context).
template <class F, int N>
void prepare_mv_tma() {
  if constexpr (tma_format<F>())
    cudaFuncSetAttribute(mv_tma_kernel<F, N>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
}

}  // namespace df::cudamv
