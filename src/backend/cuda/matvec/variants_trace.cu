// The workbench's traced matvec (variants.cuh matvec_traced): the backend's n = 1 launch of
// Q4_0 / Q8_0 (launch_mv_fused with family_dp4a.cu's configuration, dp4a_pipe.cuh) in
// mv_kernel's kTrace instances, which stamp each block's phases into W.trace.
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/dp4a_pipe.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/variants.cuh"

namespace df::cudamv {

namespace {

template <class F>
bool traced(const PackedWeight& W, const float* x, float* y, const MatvecFusion& fu, cudaStream_t s) {
  if (!launch_mv_fused<PlanarAdapter<F>, 1, Dp4aPipe, true>(planar_view(W), x, y, fuse_of(W, 1, fu), s)) return false;
  check_launch("matvec (traced)");
  return true;
}

}  // namespace

void prepare_traced() {
  prepare_mv_n<PlanarAdapter<Dp4aQ4_0>, 1, Dp4aPipe, true>();
  prepare_mv_n<PlanarAdapter<Dp4aQ8_0>, 1, Dp4aPipe, true>();
}

bool matvec_traced(const PackedWeight& W, const float* x, float* y, const MatvecFusion& fu, cudaStream_t s) {
  if (!W.int8_x) return false;
  if (W.type == GgmlType::Q4_0) return traced<Dp4aQ4_0>(W, x, y, fu, s);
  if (W.type == GgmlType::Q8_0) return traced<Dp4aQ8_0>(W, x, y, fu, s);
  return false;
}

}  // namespace df::cudamv
