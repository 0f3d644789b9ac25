// The GEMM over the planar-layout formats (dev_fast.cuh): every tile.
#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/dequant_slab.cuh"
#include "backend/cuda/gemm/gemm_kernel.cuh"
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

bool gemm_fast(GgmlType t, const PlanarView& v, const __half* x, int64_t n, float* y, int64_t ys, int code,
               cudaStream_t s) {
  return launch_list<true>(Sources{}, t, v, x, n, y, ys, code, s);
}

bool dequant_fast(GgmlType t, const PlanarView& v, SlabRange sr, __half* out, cudaStream_t s) {
  return dequant_list(Sources{}, t, v, sr, out, s);
}

}  // namespace df::cuda::gemm
