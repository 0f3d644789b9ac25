// The F32 / F16 / BF16 microkernel (gemm_tiled.h interface), for every ISA: the element
// policy E of the ISA's translation unit supplies the vectors (kernels_avx2.cpp,
// kernels_avx512.cpp):
//   using Block;  using V;  using Acc;        element type, loaded vector, f32 accumulator
//   static constexpr int kStep;               elements per step
//   static constexpr int kRegs;               accumulators that fit in registers
//   static V load(const Block*);  static V load_tail(const Block*, int64_t m /*< kStep*/);
//   static Acc madd(Acc acc, V w, V a);  static Acc zero();  static Acc add(Acc, Acc);
//   static float hsum(Acc);
//
// Four accumulator sets per output, whatever the tile (issue 15: a row computed in a tile of
// several gives the bits of the row alone): set u takes the steps u, u + 4, u + 8, ... of the
// main part, set 0 also the rest (whole steps, then the zero-filled tail); then
// hsum(((s0 + s1) + s2) + s3). Small tiles (decode: 1 x 1) interleave the four chains; large
// ones make one pass per set over each chunk of k, so that they keep one accumulator per
// output in registers.
//
// Instantiated only with policies from an anonymous namespace, so every instantiation has
// internal linkage (code built for one ISA is never linked into another's callers).
#pragma once
#include <cstdint>

namespace df::cpu::floatmk {

template <class E, int Rows, int Cols>
struct MkFloat {
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = 1;
  using B = typename E::Block;
  using Acc = typename E::Acc;

  // acc[r][c] += w[r][k..k+step) . a[c][k..k+step)  (m < kStep valid elements when Tail)
  template <int R, int C, bool Tail>
  static void step(const B* const* w, const B* const* a, int64_t k, int64_t m, Acc (&acc)[R][C]) {
    typename E::V wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = Tail ? E::load_tail(w[r] + k, m) : E::load(w[r] + k);
#pragma GCC unroll 8
    for (int c = 0; c < C; ++c) {
      const typename E::V av = Tail ? E::load_tail(a[c] + k, m) : E::load(a[c] + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][c] = E::madd(acc[r][c], wv[r], av);
    }
  }

  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* wp, const uint8_t* const* ap, float* out) {
    constexpr int U = 4;
    constexpr int64_t S = E::kStep;
    const B* w[R];
    const B* a[C];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const B*>(wp[r]);
    for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const B*>(ap[c]);
    Acc acc[U][R][C];
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int c = 0; c < C; ++c) acc[u][r][c] = E::zero();
    const int64_t main_end = n / (U * S) * (U * S);
    if constexpr (U * R * C <= E::kRegs) {
      for (int64_t k = 0; k < main_end; k += U * S)
#pragma GCC unroll 4
        for (int u = 0; u < U; ++u) step<R, C, false>(w, a, k + u * S, 0, acc[u]);
    } else {  // chunks of 16 steps per set, which stay in L1 / L2 over the four passes
      constexpr int64_t kChunk = 16 * U * S;
      for (int64_t k0 = 0; k0 < main_end; k0 += kChunk) {
        const int64_t k1 = k0 + kChunk < main_end ? k0 + kChunk : main_end;
#pragma GCC unroll 1
        for (int u = 0; u < U; ++u) {
          Acc cur[R][C];
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) cur[r][c] = acc[u][r][c];
          for (int64_t k = k0 + u * S; k < k1; k += U * S) step<R, C, false>(w, a, k, 0, cur);
          for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) acc[u][r][c] = cur[r][c];
        }
      }
    }
    int64_t k = main_end;
    for (; k + S <= n; k += S) step<R, C, false>(w, a, k, 0, acc[0]);
    if (k < n) step<R, C, true>(w, a, k, n - k, acc[0]);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        Acc s = acc[0][r][c];
        for (int u = 1; u < U; ++u) s = E::add(s, acc[u][r][c]);
        out[r * C + c] = E::hsum(s);
      }
  }
};

}  // namespace df::cpu::floatmk
