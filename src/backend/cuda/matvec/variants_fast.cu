// The workbench's variants of the f32-x planar kernels at n = 1 (variants.cuh; library
// df_cuda_matvec_variants, built for bench/ only: the backend runs family_fast.cu's defaults):
// the (RW, U) grid of variants_rwu.cuh, the x path at RW = U = 2 (122: global memory, 1022:
// the shared-memory copy), the other integer-to-float conversion at RW = 2 (2021, 2022).
#include "backend/cuda/matvec/dev_fast.cuh"
#include "backend/cuda/matvec/variants.cuh"
#include "backend/cuda/matvec/variants_rwu.cuh"

namespace df::cudamv {

namespace {

template <class F>
bool launch_fast(int code, const PlanarView& v, const float* x, float* y, cudaStream_t s) {
  using A = PlanarAdapter<F>;
  using O = PlanarAdapter<typename F::Other>;
  switch (code) {
    case 122: launch_mv<A, 1, 2, 2>(v, x, y, s, false); return true;
    case 1022: launch_mv<A, 1, 2, 2>(v, x, y, s, true); return true;
    case 2021: launch_mv<O, 1, 2, 1>(v, x, y, s); return true;
    case 2022: launch_mv<O, 1, 2, 2>(v, x, y, s); return true;
    default: return variants::launch_rwu<A>(code, v, x, y, s);
  }
}

}  // namespace

void prepare_fast_variants() {
  variants::for_each(FastFormats{}, []<class F>(F*) {
    variants::prepare_rwu<PlanarAdapter<F>>();
    prepare_mv<PlanarAdapter<typename F::Other>, 1, 2, 1>();
    prepare_mv<PlanarAdapter<typename F::Other>, 1, 2, 2>();
  });
}

bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  const PlanarView v = planar_view(W);
  if (!variants::for_type(FastFormats{}, W.type, [&]<class F>(F*) { return launch_fast<F>(code, v, x, y, s); }))
    return false;
  check_launch("matvec variant");
  return true;
}

}  // namespace df::cudamv
