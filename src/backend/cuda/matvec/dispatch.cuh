// Internal: the launchers of each kernel family, called by matvec.cu. Each returns false
// when it does not handle the type.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/matvec/mv_fuse.cuh"
#include "quant/types.h"

namespace df::cudamv {

// What a family's matvec launcher did: not its type, launched, or (fusions asked for) this
// shape cannot fuse them (nothing launched).
enum class Mv { kNoType, kDone, kNoFuse };

Mv matvec_raw_basic(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
Mv matvec_raw_iq(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
bool get_rows_raw_basic(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s);
bool get_rows_raw_iq(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s);

// Kernel attributes (the shared-memory limit) of each family, set by Context.
void prepare_raw_basic();
void prepare_raw_iq();
void prepare_fast();
void prepare_dp4a();
void prepare_dp4a_pipe();


void check_launch(const char* what);  // throws df::Error on a launch error

}  // namespace df::cudamv

namespace df::cudamv {

struct PackedWeight;

// The planar-layout kernels (family_fast.cu): false when the type has none.
Mv matvec_fast(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
bool get_rows_fast(const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s);
// Workbench: n = 1 in configuration code = 10 * RW (rows per warp) + U (parts in flight per
// lane) with the format's default x path (codes 11 12 14 21 22 24 41 42), or RW = U = 2 with
// x read from global memory (122) or from the shared-memory copy (1022), or with the other
// integer-to-float conversion (dev_fast.cuh) at RW = 2, U = 1 (2021) or 2 (2022); false when
// not available.
bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s);

// The int8-x kernels (family_dp4a.cu): kNoType when the type has none.
Mv matvec_dp4a(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
// Workbench: the int8-x kernel at n = 1, code = 3000 + 10 * RW + U (3011 3012 3014 3021 3022
// 3024 3041 3042), whatever W.int8_x says; false when the type or width has none.
bool matvec_dp4a_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s);
// Workbench: the pipelined int8-x kernel (mv_kernel's D > 0) at n rows (1, 4 or 8), code =
// 5000 + 100 D + 10 RW + U (family_dp4a_pipe.cu lists them per n), launched with PDL when W.pdl;
// false when the type, width, n or code has none.
bool matvec_dp4a_pipe_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s, int n = 1);
// Its registers per thread and local-memory (spill) bytes; false when there is no such variant.
bool matvec_dp4a_pipe_regs(GgmlType t, int code, int& regs, int& local_bytes, int n = 1);

}  // namespace df::cudamv
