// The exp row loops compiled for AVX2 (see exp_kernels_impl.h).
#include "backend/cpu/exp_kernels_impl.h"

namespace df::cpu {

const ExpKernels& exp_kernels_avx2() {
  static const ExpKernels k = exp_impl::kernels<Isa::AVX2>();
  return k;
}

}  // namespace df::cpu
