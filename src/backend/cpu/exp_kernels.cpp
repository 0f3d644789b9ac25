#include "backend/cpu/exp_kernels_impl.h"

namespace df::cpu {

const ExpKernels& exp_kernels(Isa isa) {
  static const ExpKernels scalar = exp_impl::kernels<Isa::SCALAR>();
  switch (isa) {
    case Isa::AVX512: return exp_kernels_avx512();
    case Isa::AVX2: return exp_kernels_avx2();
    default: return scalar;
  }
}

}  // namespace df::cpu
