// The grouped GEMM (grouped.cuh) over the formats of gemm_raw_iq.cu: the 32x128 tile, plain and SwiGLU.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/grouped_kernel.cuh"
#include "backend/cuda/matvec/dev_raw_iq.cuh"

namespace df::cuda::gemm {

namespace {
using namespace cudamv;
using Sources = SourceList<RawSource<RawIQ2_XXS>, RawSource<RawIQ2_XS>, RawSource<RawIQ2_S>, RawSource<RawIQ3_XXS>,
                           RawSource<RawIQ3_S>, RawSource<RawIQ1_S>, RawSource<RawIQ1_M>, RawSource<RawTQ1_0>,
                           RawSource<RawTQ2_0>>;
}  // namespace

bool grouped_raw_iq(const GroupedArgs& g, cudaStream_t s) { return grouped_list(Sources{}, g, s); }

}  // namespace df::cuda::gemm
