// The workbench's variants of the int8-x kernels at n = 1 (variants.cuh; library
// df_cuda_matvec_variants, built for bench/ only: the backend runs family_dp4a.cu's defaults):
// code 3000 + the (RW, U) code of variants_rwu.cuh.
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/variants.cuh"
#include "backend/cuda/matvec/variants_rwu.cuh"

namespace df::cudamv {

void prepare_dp4a_variants() {
  variants::for_each(Dp4aFormats{}, []<class F>(F*) { variants::prepare_rwu<PlanarAdapter<F>>(); });
}

bool matvec_dp4a_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  if (!int8_x_supported(W.type, W.cols) || code < 3000) return false;
  const PlanarView v = planar_view(W);
  if (!variants::for_type(Dp4aFormats{}, W.type,
                          [&]<class F>(F*) { return variants::launch_rwu<PlanarAdapter<F>>(code - 3000, v, x, y, s); }))
    return false;
  check_launch("matvec variant");
  return true;
}

}  // namespace df::cudamv
