// Raw-layout kernels of the IQ and ternary formats.
#include "backend/cuda/matvec/dev_raw_iq.cuh"
#include "backend/cuda/matvec/launch_raw.cuh"

namespace df::cudamv {

namespace {
using Formats = FormatList<RawIQ2_XXS, RawIQ2_XS, RawIQ2_S, RawIQ3_XXS, RawIQ3_S, RawIQ1_S, RawIQ1_M, RawTQ1_0, RawTQ2_0>;
}  // namespace

Mv matvec_raw_iq(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  return matvec_raw_list(Formats{}, t, v, x, y, n, s, f);
}
bool get_rows_raw_iq(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  return get_rows_raw_list(Formats{}, t, v, ids, n, out, s);
}

void prepare_raw_iq() { prepare_raw_list(Formats{}); }

}  // namespace df::cudamv
