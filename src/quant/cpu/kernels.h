// CPU matrix kernels for every supported weight type: llama.cpp's "vec_dot" scheme.
// Activations are first rounded to the weight type's dot format (F32 -> F32, F16 -> F16,
// BF16 -> BF16, Q8_0 / IQ4_NL / Q1_0 / Q2_0 -> Q8_0 blocks, the other IQ and TQ types ->
// Q8_K blocks), then each output element is an
// integer or half-precision dot product with the weight row, as ggml does, so that results
// agree with llama.cpp up to summation order.
//
// Every kernel has a scalar reference; SIMD versions (AVX2/FMA, AVX-512) are chosen at run
// time from the CPU's features, or forced with an Isa value (flag --isa).
//
// Layout of the implementation:
//   quant/blocks.h                    the block structs (shared with the CUDA kernels)
//   quant/format.h, formats*.h/.cpp   one struct per format: block type, reference code;
//                                     formats.h lists them all (WeightFormats, ActFormats)
//   quant/ggml_lanes.h                ggml's f32 order, emulated by the reference dots
//   quant/dot_math.h                  the plain mathematical dot (f64 on dequantised rows)
//   registry.h                        how kernels plug in: per ISA translation unit a
//                                     Simd<Format> template, a registry generated from the
//                                     format lists; the fallback rule in kernels.cpp
//   kernels_scalar.cpp                the scalar reference kernels (every format)
//   kernels_<isa>.cpp                 F32 F16 BF16 Q8_0 and the activation quantisers
//   legacy_<isa>.cpp, block32_mk.h    Q4_0 Q4_1 Q5_0 Q5_1 MXFP4 NVFP4
//   q8_lanes_vnni512.h                Q8_0's AVX-512 prefill GEMM (legacy_avx512.cpp)
//   kquant_<isa>.cpp, kquant_mk.h     Q2_K .. Q6_K
//   lowbit_<isa>.cpp                  IQ*, TQ1_0, TQ2_0, Q1_0, Q2_0
//   gemm_tiled.h, simd_avx2.h         the register-tiled driver; shared AVX2 helpers
// Numerics (what each weight type computes) are documented in formats_float.h,
// formats_q8.h and at the top of each ISA file. quantize_act is bit exact with ggml-cpu's
// from_float on x86 for every ISA; gemm/vec_dot differ from ggml only in f32 summation
// order (tests/models/test_cpu_kernels_ref.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "quant/types.h"

namespace df::cpu {

enum class Isa { SCALAR = 0, AVX2 = 1, AVX512 = 2 };
Isa best_isa();                       // what this CPU supports
std::string_view isa_name(Isa isa);
Isa parse_isa(std::string_view s);    // "scalar" | "avx2" | "avx512" | "auto"

// Format the activations of a product with a weight of type w are rounded to.
GgmlType vec_dot_type(GgmlType w);
// Bytes of one activation row of n elements in vec_dot_type(w).
size_t act_row_bytes(GgmlType w, int64_t n);

// Kernels for one ISA. All pointers are to rows of n elements (n a multiple of the block).
struct Kernels {
  Isa isa;
  // x[n] floats -> one activation row in vec_dot_type(w).
  void (*quantize_act)(GgmlType w, const float* x, void* out, int64_t n);
  // dot(weight row of type w, prepared activation row).
  float (*vec_dot)(GgmlType w, int64_t n, const void* w_row, const void* act_row);
  // Y[r * ldy + i] = dot(W row i, act row r) for i in [i0, i1), r in [0, n_act).
  // W rows are w_stride bytes apart; act rows act_stride bytes apart. Weight rows are read
  // once per call (tiles over activation rows inside).
  void (*gemm)(GgmlType w, int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
               const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
  // As gemm, and every output has the bits of the same activation row multiplied alone
  // (gemm with n_act = 1, the decode kernel) whatever n_act is: the row-exact kernels of
  // decode, speculative verify and batched server rows. gemm's multi-row tiles of F32, F16,
  // BF16 and Q8_0 sum in llama.cpp's batched order instead (prompt prefill); for the other
  // formats gemm is already row exact and gemm_exact is the same kernel.
  void (*gemm_exact)(GgmlType w, int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                     const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);
};
// The kernel table for an ISA (immutable, thread safe; gemm is single-threaded: callers
// split [i0, i1) across threads). Throws df::Error if this CPU lacks the ISA. All entries
// throw df::Error for a type without kernels or n not a multiple of its block size.
const Kernels& kernels(Isa isa);

// Scalar reference dequantization of a row of type t (any supported type) into floats.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
// Reference quantization of floats into a row of type t (F32/F16/BF16/Q8_0, TQ1_0, TQ2_0,
// Q1_0, Q2_0 ...), as ggml's quantize_row_*_ref (used by the model generator and tests);
// throws df::Error for types without one (the IQ types). Both are bit exact
// with libggml-base's to_float / from_float_ref (tests/models/test_dequant_ref.cpp), except
// that F16 NaNs keep their payload as F16C does (ggml's portable code writes 0x7e00).
void quantize_row_ref(GgmlType t, const float* src, void* dst, int64_t n);

}  // namespace df::cpu
