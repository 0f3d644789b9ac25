// Internal: the int8-x planar formats' pipelined configuration per n (launch.cuh's P), shared
// by their launchers (family_dp4a.cu) and the workbench's traced launch (variants_trace.cu).
#pragma once
#include "backend/cuda/matvec/launch.cuh"
#include "quant/types.h"

namespace df::cudamv {

// The pipelined configuration (launch.cuh) of the int8-x formats per n, measured on the H200
// (bench/cuda/README.md, "Pipelined loads"; results/h200_2026-12-01_mvpipe_run{1,2}_matvec.*):
// n = 1: two rows per warp, Q4_0 / Q8_0 2 parts per lane loaded 3 steps ahead, Q6_K 1 part 2
// steps ahead, IQ4_XS 2 parts 2 steps ahead; Q4_K keeps the unpipelined loop (its 4 parts
// per lane in flight were faster than every pipelined variant); x not staged (slower in
// every case measured).
// n = 2..8 (a speculative verify's rows; Context::pipe_rows; the previous loop ran n > 2 at
// one row per warp and one part in flight): configurations without register spills (ptxas,
// sm_90, 128 registers at two blocks per SM; checked at n = 2, 4, 8), the accumulators growing
// as RW n floats: Q8_0 as n = 1; Q4_0 as n = 1 up to n = 4, then 2 steps ahead; IQ4_XS 2 parts
// 2 steps ahead; Q6_K one row per warp, 2 parts (n <= 4) or 1, 2 steps ahead, its SwiGLU pair
// (two rows per warp) unpipelined with one part; Q4_K (n > 2) 1 part at two rows per warp
// 2 steps ahead (n <= 4), then 2 parts at one row, its SwiGLU pair not in one launch above
// n = 4. Q5_K takes Q4_K's configurations, Q5_0 / Q5_1 Q4_0's (not measured for them). Which lane takes which
// parts, and so every bit, is that of the previous loop.
template <class A, int N>
struct Dp4aPipe {
  static constexpr GgmlType kT = A::kType;
  static constexpr bool kQ6 = kT == GgmlType::Q6_K, kQ4K = kT == GgmlType::Q4_K || kT == GgmlType::Q5_K;
  static constexpr bool kLegacy = kT == GgmlType::Q4_0 || kT == GgmlType::Q5_0 || kT == GgmlType::Q5_1;
  static constexpr int kD = kT == GgmlType::Q8_0 ? 3
                            : kLegacy ? (N <= 4 ? 3 : 2)
                            : kQ6 || kT == GgmlType::IQ4_XS ? 2
                            : kQ4K && N > 2 ? 2
                                            : 0;
  static constexpr bool kOn = kD > 0;
  static constexpr int kRW = !kOn ? DefaultConfig<A, N>::kRW : N > 1 && (kQ6 || (kQ4K && N > 4)) ? 1 : 2;
  static constexpr int kU = !kOn             ? DefaultConfig<A, N>::kU
                            : N == 1 && kQ6  ? 1
                            : kQ6            ? (N <= 4 ? 2 : 1)
                            : kQ4K           ? (N <= 4 ? 1 : 2)
                                             : 2;
  static constexpr bool kSw = !(kQ4K && N > 4);
  static constexpr int kSwU = N > 1 && kQ6 ? 1 : kQ4K ? 1 : kU;
  static constexpr int kSwD = N > 1 && kQ6 ? 0 : kD;
  static constexpr bool kStage = false;
};

}  // namespace df::cudamv
