// The workbench's traced matvec (variants.cuh matvec_traced): the backend's n = 1 launch of
// Q4_0 / Q8_0 in mv_kernel's kTrace instance, which stamps each block's phases into W.trace.
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/variants.cuh"

namespace df::cudamv {

namespace {

// The configuration family_dp4a.cu's Dp4aPipe gives Q4_0 and Q8_0 at n = 1 (every fusion, the
// SwiGLU pair included): two rows per warp, two parts per lane, loads three steps ahead, the
// int8 x in shared memory, not staged.
constexpr int kRW = 2, kU = 2, kD = 3;

template <class F>
bool traced(const PackedWeight& W, const float* x, float* y, const MatvecFusion& fu, cudaStream_t s) {
  MvFuse f = fuse_of(W, 1, fu);
  f.stage_x = false;
  const PlanarView v = planar_view(W);
  const size_t smem = xq_bytes(1, v.cols, f.norm_w != nullptr);
  if (smem > kMaxSmem || !int8x_fits(v.cols) || !can_fuse<PlanarAdapter<F>, 1, kRW>(v, f)) return false;
  launch_persistent<PlanarAdapter<F>, 1, kRW, kU, true, kD, true>(v, x, y, smem, s, f);
  check_launch("matvec (traced)");
  return true;
}

}  // namespace

void prepare_traced() {
  cudaFuncSetAttribute(mv_kernel<PlanarAdapter<Dp4aQ4_0>, 1, kRW, kU, true, kD, true>,
                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxSmem));
  cudaFuncSetAttribute(mv_kernel<PlanarAdapter<Dp4aQ8_0>, 1, kRW, kU, true, kD, true>,
                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kMaxSmem));
}

bool matvec_traced(const PackedWeight& W, const float* x, float* y, const MatvecFusion& fu, cudaStream_t s) {
  if (!W.int8_x || !W.pipe) return false;
  if (W.type == GgmlType::Q4_0) return traced<Dp4aQ4_0>(W, x, y, fu, s);
  if (W.type == GgmlType::Q8_0) return traced<Dp4aQ8_0>(W, x, y, fu, s);
  return false;
}

}  // namespace df::cudamv
