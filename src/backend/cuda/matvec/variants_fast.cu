// The workbench's variants of the f32-x planar kernels (variants.cuh; library
// df_cuda_matvec_variants, built for bench/ only: the backend runs family_fast.cu's defaults).
#include "backend/cuda/matvec/dev_fast.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/variants.cuh"

namespace df::cudamv {

namespace {

template <class F>
using PA = PlanarAdapter<F>;

// n = 1 in configuration code (variants.cuh).
template <class F>
bool launch_variant(const PlanarView& v, const float* x, float* y, int code, cudaStream_t s) {
  switch (code) {
    case 11: launch_mv<PA<F>, 1, 1, 1>(v, x, y, s); return true;
    case 12: launch_mv<PA<F>, 1, 1, 2>(v, x, y, s); return true;
    case 14: launch_mv<PA<F>, 1, 1, 4>(v, x, y, s); return true;
    case 21: launch_mv<PA<F>, 1, 2, 1>(v, x, y, s); return true;
    case 22: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s); return true;
    case 24: launch_mv<PA<F>, 1, 2, 4>(v, x, y, s); return true;
    case 41: launch_mv<PA<F>, 1, 4, 1>(v, x, y, s); return true;
    case 42: launch_mv<PA<F>, 1, 4, 2>(v, x, y, s); return true;
    case 122: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s, false); return true;
    case 1022: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s, true); return true;
    case 2021: launch_mv<PA<typename F::Other>, 1, 2, 1>(v, x, y, s); return true;
    case 2022: launch_mv<PA<typename F::Other>, 1, 2, 2>(v, x, y, s); return true;
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
  prepare_mv<PA<typename F::Other>, 1, 2, 1>();
  prepare_mv<PA<typename F::Other>, 1, 2, 2>();
}

template <class... Fs>
bool variant_list(FastList<Fs...>, const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  const PlanarView v = planar_view(W);
  return ((Fs::kType == W.type ? launch_variant<Fs>(v, x, y, code, s) : false) || ...);
}

template <class... Fs>
void prepare_list(FastList<Fs...>) {
  (prepare_one<Fs>(), ...);
}

}  // namespace

void prepare_fast_variants() { prepare_list(FastFormats{}); }

bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  if (!variant_list(FastFormats{}, W, x, y, code, s)) return false;
  check_launch("matvec variant");
  return true;
}

}  // namespace df::cudamv
