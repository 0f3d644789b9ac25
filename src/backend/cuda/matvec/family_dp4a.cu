// Launchers of the int8-x formats (dev_dp4a.cuh): matvec with the default configuration per
// n (the workbench's variants: variants_dp4a.cu). Weights are those of the planar layout (family_fast.cu
// owns get_rows and the f32-x kernels of the same types).
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/dp4a_pipe.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cudamv {

namespace {

template <class F>
using PA = PlanarAdapter<F>;

template <class... Fs>
Mv matvec_list(Dp4aList<Fs...>, const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s,
               const MvFuse& f) {
  const PlanarView v = planar_view(W);
  Mv r = Mv::kNoType;
  ((Fs::kType == W.type ? (r = launch_mv_default<PA<Fs>, Dp4aPipe>(v, x, y, n, s, f) ? Mv::kDone : Mv::kNoFuse, true) : false) ||
   ...);
  return r;
}

template <class... Fs>
void prepare_list(Dp4aList<Fs...>) {
  (prepare_mv_default<PA<Fs>, Dp4aPipe>(), ...);
}

template <class... Fs>
bool has_type(Dp4aList<Fs...>, GgmlType t) {
  return ((Fs::kType == t) || ...);
}

}  // namespace

// The planar formats of Dp4aFormats and the raw-block ones of family_i8_*.cu.
bool int8_x_supported(GgmlType type, int64_t cols) {
  return (has_type(Dp4aFormats{}, type) || i8_basic_has(type) || i8_iq_has(type)) && int8x_fits(cols);
}

Mv matvec_dp4a(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  const Mv r = matvec_list(Dp4aFormats{}, W, x, y, n, s, f);
  if (r == Mv::kDone) check_launch("matvec");
  return r;
}

void prepare_dp4a() { prepare_list(Dp4aFormats{}); }

}  // namespace df::cudamv
