// Host entry points of the mma_planar.cuh instances (helper mvmma2): per type one translation
// unit (mma2_q4_0.cu, mma2_q8_0.cu, compiled in parallel), each with every (source, N = 1..8,
// wk = 1 / wk > 1) instance at the type's pipeline depth (Q4_0 D = 2, Q8_0 D = 3: the depths
// that won in mvmma's run 2).
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "mvmma/mma_planar.cuh"

namespace df::mvmma2 {

enum class Src { Tile = 0, Shfl = 1, Ld32 = 2 };
inline const char* src_name(Src s) { return s == Src::Tile ? "tile" : s == Src::Shfl ? "planar_shfl" : "planar_ld32"; }
constexpr int kDepthQ4_0 = 2, kDepthQ8_0 = 3;

struct Attr {
  Src src;
  int n;
  bool kwk;
  int regs, local_bytes;
};

void prepare_q4_0();
void prepare_q8_0();
std::vector<Attr> attrs_q4_0();
std::vector<Attr> attrs_q8_0();
cudaError_t launch_q4_0(Src src, const WView& v, const float* x, float* y, float* part, unsigned* cnt, int n, int ks,
                        int wk, bool pdl, cudaStream_t st);
cudaError_t launch_q8_0(Src src, const WView& v, const float* x, float* y, float* part, unsigned* cnt, int n, int ks,
                        int wk, bool pdl, cudaStream_t st);

}  // namespace df::mvmma2
