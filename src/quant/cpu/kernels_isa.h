// Internal: the kernel tables each ISA translation unit defines, and helpers they share.
#pragma once
#include "quant/cpu/kernels.h"

namespace df::cpu {

extern const Kernels kKernelsScalar;  // kernels_scalar.cpp
extern const Kernels kKernelsAvx2;    // kernels_avx2.cpp   (AVX2 + FMA + F16C)
extern const Kernels kKernelsAvx512;  // kernels_avx512.cpp (F/BW/VL/DQ/VNNI/BF16)

// Throws df::Error unless n is a positive multiple of w's block size.
void check_row_elems(GgmlType w, int64_t n);

// One weight format's kernels on one ISA, for families kept in their own translation units
// (lowbit_avx2.cpp, lowbit_avx2.cpp, ...; same contracts as Kernels, with the type fixed and n
// already checked). The ISA's main file consults ext_kernels before falling back to scalar.
struct FormatKernels {
  void (*quantize_act)(const float* x, void* out, int64_t n);
  float (*vec_dot)(int64_t n, const void* w_row, const void* act_row);
  void (*gemm)(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
               const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};
// nullptr when isa has no such kernels for w (kernels_ext.cpp).
const FormatKernels* ext_kernels(Isa isa, GgmlType w);

}  // namespace df::cpu
