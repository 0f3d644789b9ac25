// Raw-layout kernels of IQ4_NL, the FP4, Q1_0/Q2_0 and the K-quant formats
// without a planar layout.
#include "backend/cuda/matvec/dev_raw_basic.cuh"
#include "backend/cuda/matvec/launch_raw.cuh"

namespace df::cudamv {

namespace {
using Formats = FormatList<RawIQ4_NL, RawMxfp4, RawNvfp4, RawQ1_0, RawQ2_0, RawQ2_K, RawQ3_K>;
}  // namespace

Mv matvec_raw_basic(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  return matvec_raw_list(Formats{}, t, v, x, y, n, s, f);
}
bool get_rows_raw_basic(GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  return get_rows_raw_list(Formats{}, t, v, ids, n, out, s);
}

void prepare_raw_basic() { prepare_raw_list(Formats{}); }

}  // namespace df::cudamv
