// Raw-layout kernels of the float, legacy, FP4, Q1_0/Q2_0 and K-quant formats.
#include "backend/cuda/matvec/dev_raw_basic.cuh"
#include "backend/cuda/matvec/launch_raw.cuh"

namespace df::cudamv {

namespace {
using Formats = FormatList<RawF32, RawF16, RawBF16, RawQ4_0, RawQ4_1, RawQ5_0, RawQ5_1, RawQ8_0, RawIQ4_NL, RawMxfp4, RawNvfp4, RawQ1_0, RawQ2_0, RawQ2_K, RawQ3_K, RawQ4_K, RawQ5_K, RawQ6_K>;
}  // namespace

bool matvec_raw_basic(GgmlType t, const RawView& v, const float* x, float* y, int n, cudaStream_t s) {
  return matvec_raw_list(Formats{}, t, v, x, y, n, s);
}
bool get_rows_raw_basic(GgmlType t, const RawView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  return get_rows_raw_list(Formats{}, t, v, ids, n, out, s);
}

}  // namespace df::cudamv
