// The exp row loops compiled for AVX512 (see exp_kernels_impl.h).
#include "backend/cpu/exp_kernels_impl.h"

namespace df::cpu {

const ExpKernels& exp_kernels_avx512() {
  static const ExpKernels k = exp_impl::kernels<Isa::AVX512>();
  return k;
}

}  // namespace df::cpu
