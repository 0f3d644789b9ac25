// int8-x kernels of the raw-layout K-quants Q2_K / Q3_K, IQ4_NL, the FP4, Q1_0 / Q2_0 and the
// ternary TQ2_0 / TQ1_0.
#include "backend/cuda/matvec/dev_i8_basic.cuh"
#include "backend/cuda/matvec/family_i8.cuh"

namespace df::cudamv {

namespace {
using Formats = I8List<i8::Q2_K, i8::Q3_K, i8::IQ4_NL, i8::Mxfp4, i8::Nvfp4, i8::Q1_0, i8::Q2_0, i8::TQ2_0, i8::TQ1_0>;
}  // namespace

bool i8_basic_has(GgmlType t) { return i8_has_type(Formats{}, t); }
Mv matvec_i8_basic(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  return matvec_i8_list(Formats{}, t, v, x, y, n, s, f);
}
void prepare_i8_basic() { prepare_i8_list(Formats{}); }

}  // namespace df::cudamv
