#include "quant/cpu/kernels_isa.h"
namespace df::cpu {
const FormatKernels* lowbit_kernels_avx512(GgmlType) { return nullptr; }
}  // namespace df::cpu
