// Internal: the launchers of each kernel family, called by matvec.cu. Each returns false
// when it does not handle the type.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/matvec/mv_fuse.cuh"
#include "quant/types.h"

namespace df::cudamv {

// What a family's matvec launcher did: not its type, launched, or (fusions asked for) this
// shape cannot fuse them (nothing launched).
enum class Mv { kNoType, kDone, kNoFuse };

// The kernels' fusions of fu for a launch of W over n rows (matvec.cu; checked against W,
// throws df::Error on a bad combination): what matvec_fused hands the families.
MvFuse fuse_of(const PackedWeight& W, int n, const MatvecFusion& fu);

Mv matvec_raw_basic(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
Mv matvec_raw_iq(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
// The int8-x kernels over raw blocks (family_i8_basic.cu, family_i8_iq.cu): whether a type has
// one, and its launcher (kNoType when not).
bool i8_basic_has(GgmlType t);
bool i8_iq_has(GgmlType t);
Mv matvec_i8_basic(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
Mv matvec_i8_iq(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
bool get_rows_raw_basic(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s);
bool get_rows_raw_iq(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s);

// Kernel attributes (the shared-memory limit) of each family, set by Context.
void prepare_raw_basic();
void prepare_raw_iq();
void prepare_fast();
void prepare_dp4a();
void prepare_i8_basic();
void prepare_i8_iq();


// The IQ tables (DevTables) filled on the host, as Context uploads them.
void fill_tables(DevTables& h);

void check_launch(const char* what);  // throws df::Error on a launch error

}  // namespace df::cudamv

namespace df::cudamv {

// The planar view of a packed weight: its quant and meta planes, shape and IQ tables.
inline PlanarView planar_view(const PackedWeight& W) {
  return PlanarView{W.data, W.data + W.m_offset, W.q_row_bytes, W.m_row_bytes, W.rows, W.cols,
                    static_cast<const DevTables*>(W.tables)};
}

// The planar-layout kernels (family_fast.cu): false when the type has none.
Mv matvec_fast(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);
bool get_rows_fast(const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s);

// The int8-x kernels (family_dp4a.cu): kNoType when the type has none.
Mv matvec_dp4a(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f);

}  // namespace df::cudamv
