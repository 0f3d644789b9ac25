// The GEMM over the raw-block formats of dev_raw_iq.cuh (IQ1_S .. IQ3_S, TQ1_0, TQ2_0): the
// 128x128 and 64x64 tiles.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/dequant_slab.cuh"
#include "backend/cuda/gemm/gemm_kernel.cuh"
#include "backend/cuda/matvec/dev_raw_iq.cuh"

namespace df::cuda::gemm {

namespace {
using namespace cudamv;
using Sources = SourceList<RawSource<RawIQ2_XXS>, RawSource<RawIQ2_XS>, RawSource<RawIQ2_S>, RawSource<RawIQ3_XXS>,
                           RawSource<RawIQ3_S>, RawSource<RawIQ1_S>, RawSource<RawIQ1_M>, RawSource<RawTQ1_0>,
                           RawSource<RawTQ2_0>>;
}  // namespace

bool gemm_raw_iq(GgmlType t, const PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
                 cudaStream_t s) {
  return launch_list<false>(Sources{}, t, v, x, n, y, ys, code, s);
}

bool dequant_raw_iq(GgmlType t, const PlanarView& v, SlabRange sr, __half* out, cudaStream_t s) {
  return dequant_list(Sources{}, t, v, sr, out, s);
}

}  // namespace df::cuda::gemm
