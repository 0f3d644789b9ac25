// mma_planar.cuh's Q4_0 instances (mma2_dispatch.h).
#include "mvmma/mma2_dispatch_impl.cuh"

namespace df::mvmma2 {
using D4 = detail::Dispatch<mvmma::MmaQ4_0, kDepthQ4_0>;
void prepare_q4_0() { D4::prepare(); }
std::vector<Attr> attrs_q4_0() { return D4::attrs(); }
cudaError_t launch_q4_0(Src src, const WView& v, const float* x, float* y, float* part, unsigned* cnt, int n, int ks,
                        int wk, bool pdl, cudaStream_t st) {
  return D4::launch(src, v, x, y, part, cnt, n, ks, wk, pdl, st);
}
}  // namespace df::mvmma2
