// The grouped GEMM (grouped.cuh) over the formats of gemm_raw_basic.cu: the 32x128 tile, plain and SwiGLU.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/grouped_kernel.cuh"
#include "backend/cuda/matvec/dev_raw_basic.cuh"

namespace df::cuda::gemm {

namespace {
using namespace cudamv;
using Sources = SourceList<RawSource<RawIQ4_NL>,
                           RawSource<RawMxfp4>, RawSource<RawNvfp4>, RawSource<RawQ1_0>, RawSource<RawQ2_0>,
                           RawSource<RawQ2_K>, RawSource<RawQ3_K>>;
}  // namespace

bool grouped_raw_basic(const GroupedArgs& g, cudaStream_t s) { return grouped_list(Sources{}, g, s); }

}  // namespace df::cuda::gemm
