// Internal: the GEMM launchers of each family of weight formats (gemm_fast.cu,
// gemm_raw_basic.cu, gemm_raw_iq.cu); each returns false when the type is not its own or the
// tile code is unknown.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/matvec/dev_common.cuh"
#include "quant/types.h"

namespace df::cuda::gemm {

bool gemm_fast(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
               cudaStream_t s);
bool gemm_raw_basic(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys,
                    int code, cudaStream_t s);
bool gemm_raw_iq(GgmlType t, const cudamv::PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
                 cudaStream_t s);

}  // namespace df::cuda::gemm
