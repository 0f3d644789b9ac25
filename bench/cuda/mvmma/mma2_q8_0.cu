// mma_planar.cuh's Q8_0 instances (mma2_dispatch.h).
#include "mvmma/mma2_dispatch_impl.cuh"

namespace df::mvmma2 {
using D8 = detail::Dispatch<mvmma::MmaQ8_0, kDepthQ8_0>;
void prepare_q8_0() { D8::prepare(); }
std::vector<Attr> attrs_q8_0() { return D8::attrs(); }
cudaError_t launch_q8_0(Src src, const WView& v, const float* x, float* y, float* part, unsigned* cnt, int n, int ks,
                        int wk, bool pdl, cudaStream_t st) {
  return D8::launch(src, v, x, y, part, cnt, n, ks, wk, pdl, st);
}
}  // namespace df::mvmma2
