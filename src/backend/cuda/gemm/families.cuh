// Internal: the GEMM launchers of each family of weight formats (gemm_fast.cu,
// gemm_raw_basic.cu, gemm_raw_iq.cu); each returns false when the type is not its own or the
// tile code is unknown. dequant_*: parts [p0, p0 + np) of rows [r0, r0 + nr) of W (a part:
// the format's kPartElems consecutive elements) to dense f16 out[nr][np * kPartElems]
// (dequant_slab.cuh); false when the type is not the family's.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/gemm/grouped.cuh"
#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cuda::gemm {

bool gemm_fast(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
               cudaStream_t s);
bool gemm_raw_basic(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys,
                    int code, cudaStream_t s);
bool gemm_raw_iq(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
                 cudaStream_t s);

// The grouped GEMM (grouped.cuh) of each family: false when the type is not the family's.
bool grouped_fast(const GroupedArgs& g, cudaStream_t s);
bool grouped_raw_basic(const GroupedArgs& g, cudaStream_t s);
bool grouped_raw_iq(const GroupedArgs& g, cudaStream_t s);

struct SlabRange {
  int64_t r0, nr;  // weight rows
  int64_t c0, nc;  // columns (multiples of 64)
};
bool dequant_fast(GgmlType t, const cudamv::PlanarView& v, SlabRange sr, __half* out, cudaStream_t s);
bool dequant_raw_basic(GgmlType t, const cudamv::PlanarView& v, SlabRange sr, __half* out, cudaStream_t s);
bool dequant_raw_iq(GgmlType t, const cudamv::PlanarView& v, SlabRange sr, __half* out, cudaStream_t s);

}  // namespace df::cuda::gemm
