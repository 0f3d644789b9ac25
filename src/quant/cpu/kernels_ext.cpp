// Registry of the kernel families kept outside the ISA main files (see kernels_isa.h).
#include "quant/cpu/kernels_isa.h"

namespace df::cpu {

// IQ, ternary and 1-2 bit formats (lowbit_avx2.cpp, lowbit_avx512.cpp).
const FormatKernels* lowbit_kernels_avx2(GgmlType w);
const FormatKernels* lowbit_kernels_avx512(GgmlType w);

const FormatKernels* ext_kernels(Isa isa, GgmlType w) {
  switch (isa) {
    case Isa::SCALAR: return nullptr;
    case Isa::AVX2: return lowbit_kernels_avx2(w);
    case Isa::AVX512: return lowbit_kernels_avx512(w);
  }
  return nullptr;
}

}  // namespace df::cpu
