// The grouped GEMM (grouped.cuh) over the formats of gemm_fast.cu: the 32x128 tile, plain and SwiGLU.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/grouped_kernel.cuh"
#include "backend/cuda/matvec/dev_fast.cuh"

namespace df::cuda::gemm {

namespace {
using namespace cudamv;
using Sources = SourceList<PlanarSource<FastF32>, PlanarSource<FastF16>, PlanarSource<FastBF16>,
                           PlanarSource<FastQ4_0>, PlanarSource<FastQ8_0>, PlanarSource<FastQ4_1>,
                           PlanarSource<FastQ5_0>, PlanarSource<FastQ5_1>, PlanarSource<FastQ4_K>,
                           PlanarSource<FastQ5_K>,
                           PlanarSource<FastQ6_K>, PlanarSource<FastIQ4_XS>>;
}  // namespace

bool grouped_fast(const GroupedArgs& g, cudaStream_t s) { return grouped_list(Sources{}, g, s); }

}  // namespace df::cuda::gemm
