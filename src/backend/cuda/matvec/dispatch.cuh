// Internal: the launchers of each kernel family, called by matvec.cu. Each returns false
// when it does not handle the type.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cudamv {

// A weight in the raw layout: rows x row_bytes (ggml blocks, rows padded to 16 bytes).
struct RawView {
  const uint8_t* w;
  size_t row_bytes;
  int64_t rows, cols;
  const DevTables* tables;
};

bool matvec_raw_basic(GgmlType t, const RawView& v, const float* x, float* y, int n, cudaStream_t s);
bool matvec_raw_iq(GgmlType t, const RawView& v, const float* x, float* y, int n, cudaStream_t s);
bool get_rows_raw_basic(GgmlType t, const RawView& v, const int32_t* ids, int n, float* out, cudaStream_t s);
bool get_rows_raw_iq(GgmlType t, const RawView& v, const int32_t* ids, int n, float* out, cudaStream_t s);


void check_launch(const char* what);  // throws df::Error on a launch error

}  // namespace df::cudamv

namespace df::cudamv {

struct PackedWeight;

// The planar-layout kernels (family_fast.cu): false when the type has none.
bool matvec_fast(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s);
bool get_rows_fast(const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s);
// Workbench: n = 1 with rw rows per warp and u parts in flight per lane (rw in {1, 2, 4},
// u in {1, 2, 4}; rw = 4 only with u <= 2); false when not available.
bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int rw, int u, cudaStream_t s);

}  // namespace df::cudamv
