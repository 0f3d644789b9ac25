// Internal: the kernel tables each ISA translation unit defines, and helpers they share.
#pragma once
#include "quant/cpu/kernels.h"

namespace df::cpu {

extern const Kernels kKernelsScalar;  // kernels_scalar.cpp
extern const Kernels kKernelsAvx2;    // kernels_avx2.cpp   (AVX2 + FMA + F16C)
extern const Kernels kKernelsAvx512;  // kernels_avx512.cpp (F/BW/VL/DQ/VNNI/BF16)

// Throws df::Error unless n is a positive multiple of w's block size.
void check_row_elems(GgmlType w, int64_t n);

}  // namespace df::cpu
