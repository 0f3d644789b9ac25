// The workbench's matvec variants (bench/cuda/bench_matvec_cuda.cu): configurations other than
// the defaults the backend runs, each launchable by a code. Library df_cuda_matvec_variants
// (variants_*.cu), built only for the benchmarks (DF_BENCH): the backend and the tests never
// run them, and CI (DF_BENCH=OFF) saves their compile time.
#pragma once
#include <cuda_runtime_api.h>

#include "backend/cuda/matvec/matvec.cuh"
#include "quant/types.h"

namespace df::cudamv {

// Kernel attributes (the shared-memory limit) of the variants' kernels; Context sets only the
// defaults' (call once after a Context exists, before launching a variant).
void prepare_fast_variants();
void prepare_dp4a_variants();
void prepare_dp4a_pipe_variants();
void prepare_traced();
inline void prepare_variants() {
  prepare_fast_variants();
  prepare_dp4a_variants();
  prepare_dp4a_pipe_variants();
  prepare_traced();
}

// The f32-x planar kernel at n = 1 in configuration code = 10 * RW (rows per warp) + U (parts
// in flight per lane) with the format's default x path (codes 11 12 14 21 22 24 41 42), or
// RW = U = 2 with x read from global memory (122) or from the shared-memory copy (1022), or
// with the other integer-to-float conversion (dev_fast.cuh) at RW = 2, U = 1 (2021) or 2
// (2022); false when not available.
bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s);

// The int8-x kernel at n = 1, code = 3000 + 10 * RW + U (3011 3012 3014 3021 3022
// 3024 3041 3042), whatever W.int8_x says; false when the type or width has none.
bool matvec_dp4a_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s);

// The pipelined int8-x kernel (mv_kernel's D > 0) at n rows (1, 4 or 8), code =
// 5000 + 100 D + 10 RW + U (variants_dp4a_pipe.cu lists them per n), launched with PDL when W.pdl;
// false when the type, width, n or code has none.
bool matvec_dp4a_pipe_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s, int n = 1);
// Its registers per thread and local-memory (spill) bytes; false when there is no such variant.
bool matvec_dp4a_pipe_regs(GgmlType t, int code, int& regs, int& local_bytes, int n = 1);

// The backend's n = 1 launch of a Q4_0 or Q8_0 matrix with int8 x (W.int8_x) and the fusions fu
// (the configuration matvec_fused would take, W.pipe and all) by mv_kernel's traced instances:
// every block stamps its phases into W.trace (mv_fuse.cuh mv_trace; kTraceWords per block, by
// block index). The same bits as matvec_fused. False (nothing launched) for other types, W
// without int8 x, or fusions this shape cannot take.
bool matvec_traced(const PackedWeight& W, const float* x, float* y, const MatvecFusion& fu, cudaStream_t s);

}  // namespace df::cudamv
