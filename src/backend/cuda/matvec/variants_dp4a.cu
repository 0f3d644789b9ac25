// The workbench's variants of the int8-x kernels at n = 1 (variants.cuh; library
// df_cuda_matvec_variants, built for bench/ only: the backend runs family_dp4a.cu's defaults).
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/variants.cuh"

namespace df::cudamv {

namespace {

template <class F>
using PA = PlanarAdapter<F>;

// The workbench's variants at n = 1 (codes: dispatch.cuh, 3000 + 10 RW + U).
template <class F>
bool launch_variant(const PlanarView& v, const float* x, float* y, int code, cudaStream_t s) {
  switch (code) {
    case 3011: launch_mv<PA<F>, 1, 1, 1>(v, x, y, s); return true;
    case 3012: launch_mv<PA<F>, 1, 1, 2>(v, x, y, s); return true;
    case 3014: launch_mv<PA<F>, 1, 1, 4>(v, x, y, s); return true;
    case 3021: launch_mv<PA<F>, 1, 2, 1>(v, x, y, s); return true;
    case 3022: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s); return true;
    case 3024: launch_mv<PA<F>, 1, 2, 4>(v, x, y, s); return true;
    case 3041: launch_mv<PA<F>, 1, 4, 1>(v, x, y, s); return true;
    case 3042: launch_mv<PA<F>, 1, 4, 2>(v, x, y, s); return true;
    default: return false;
  }
}

template <class F>
void prepare_one() {
  prepare_mv<PA<F>, 1, 1, 1>();
  prepare_mv<PA<F>, 1, 1, 2>();
  prepare_mv<PA<F>, 1, 1, 4>();
  prepare_mv<PA<F>, 1, 2, 1>();
  prepare_mv<PA<F>, 1, 2, 2>();
  prepare_mv<PA<F>, 1, 2, 4>();
  prepare_mv<PA<F>, 1, 4, 1>();
  prepare_mv<PA<F>, 1, 4, 2>();
}

template <class... Fs>
bool variant_list(Dp4aList<Fs...>, const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  const PlanarView v = planar_view(W);
  return ((Fs::kType == W.type ? launch_variant<Fs>(v, x, y, code, s) : false) || ...);
}

template <class... Fs>
void prepare_list(Dp4aList<Fs...>) {
  (prepare_one<Fs>(), ...);
}

}  // namespace

void prepare_dp4a_variants() { prepare_list(Dp4aFormats{}); }

bool matvec_dp4a_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  if (!int8_x_supported(W.type, W.cols) || !variant_list(Dp4aFormats{}, W, x, y, code, s)) return false;
  check_launch("matvec variant");
  return true;
}

}  // namespace df::cudamv
