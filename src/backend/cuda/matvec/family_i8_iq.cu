// int8-x kernels of the raw-layout IQ grid formats.
#include "backend/cuda/matvec/dev_i8_iq.cuh"
#include "backend/cuda/matvec/family_i8.cuh"

namespace df::cudamv {

namespace {
using Formats = I8List<i8::IQ2_XXS, i8::IQ2_XS, i8::IQ2_S, i8::IQ3_XXS, i8::IQ3_S, i8::IQ1_S, i8::IQ1_M>;
}  // namespace

bool i8_iq_has(GgmlType t) { return i8_has_type(Formats{}, t); }
Mv matvec_i8_iq(GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  return matvec_i8_list(Formats{}, t, v, x, y, n, s, f);
}
void prepare_i8_iq() { prepare_i8_list(Formats{}); }

}  // namespace df::cudamv
