// The GEMM over the raw-block formats of dev_raw_basic.cuh (IQ4_NL, MXFP4,
// NVFP4, Q1_0, Q2_0, Q2_K, Q3_K): the 128x128 and 64x64 tiles.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/dequant_slab.cuh"
#include "backend/cuda/gemm/gemm_kernel.cuh"
#include "backend/cuda/matvec/dev_raw_basic.cuh"

namespace df::cuda::gemm {

namespace {
using namespace cudamv;
using Sources = SourceList<RawSource<RawIQ4_NL>,
                           RawSource<RawMxfp4>, RawSource<RawNvfp4>, RawSource<RawQ1_0>, RawSource<RawQ2_0>,
                           RawSource<RawQ2_K>, RawSource<RawQ3_K>>;
}  // namespace

bool gemm_raw_basic(GgmlType t, const PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
                    cudaStream_t s) {
  return launch_list<false>(Sources{}, t, v, x, n, y, ys, code, s);
}

bool dequant_raw_basic(GgmlType t, const PlanarView& v, SlabRange sr, __half* out, cudaStream_t s) {
  return dequant_list(Sources{}, t, v, sr, out, s);
}

}  // namespace df::cuda::gemm
