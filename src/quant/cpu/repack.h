// Load-time repacked weight layouts (issue 15): a weight matrix copied once, at load, into a
// layout of interleaved rows, so that one stream of memory feeds several outputs and the
// integer products run on full 512-bit vectors, for decode (one activation row) and prefill
// (tiles of rows x tokens) alike. The CPU backend keeps the file's planar rows for every other
// use (get_rows, views) and multiplies through the repacked copy (flag --cpu-repack).
//
// Numerics: the repacked kernels keep the planar decode kernel's f32 order for every output
// (per 32-element block: exact int32 lane sums, acc = fma(scale_w * scale_a, float(isum), acc)
// on 8 lanes, then ggml's hsum_float_8), so every output has the bits of
// kernels(isa).gemm_exact / vec_dot, whatever the tile, the number of activation rows or the
// row range: repacking changes no result (tests/unit/test_repack.cpp).
//
// Layouts:
//   Q4_0 x8 (AVX-512): rows in groups of 8 (the last group padded with zero rows); per group,
//     qs[block][row][16] (the 16 nibble bytes of each of the 8 rows' block, 128 bytes a block),
//     then d[block][row] (fp16 scales), the group padded to 64 bytes.
//   Q4_K x4 (AVX-512): rows in groups of 4 (padded with zero rows); per group, qs
//     [super-block][p 0..3][half 0..1][row][16] (row bytes 32p + 16 half .. +15: the low
//     nibbles are group 2p's elements 16 half .. +15, the high nibbles group 2p+1's), then
//     per super-block 80 bytes: sc[row][8], m[row][8] (the decoded 6-bit scales and mins),
//     d[row], dmin[row] (fp16); the group padded to 64 bytes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "quant/cpu/kernels.h"

namespace df::cpu {

// True when weights of type t with rows of n elements have a repacked layout and kernels on
// this ISA.
bool repack_supported(Isa isa, GgmlType t, int64_t n);
// Bytes of the repacked copy of rows x n (repack_supported must hold).
size_t repacked_bytes(GgmlType t, int64_t n, int64_t rows);
// Rows [r0, r1) of the planar matrix src (rows src_stride bytes apart, the file's layout)
// into the repacked copy dst of all `rows` rows; r0 and r1 multiples of the group size
// (r1 may be rows). Padding rows of the last group are written as zeros.
int64_t repack_group_rows(GgmlType t);
void repack_rows(GgmlType t, int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1,
                 uint8_t* dst);
// Kernels::gemm's contract over a repacked matrix of `rows` rows (any 0 <= i0 < i1 <= rows):
// Y[r * ldy + i] = dot(W row i, act row r). Every output has the bits of the planar
// kernels(isa).gemm_exact, so this one kernel serves decode, verify and prefill.
void gemm_repacked(Isa isa, GgmlType t, int64_t n, const uint8_t* Wr, int64_t rows, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);

// Internal: the layouts (repack.cpp) and their kernels (repack_avx512.cpp,
// repack_kquant_avx512.cpp).
inline constexpr int64_t kQ4_0x8Rows = 8;
// Bytes of one group of 8 rows of ng blocks: qs [ng][8][16], d [ng][8], padded to 64.
constexpr size_t q4_0x8_group_bytes(int64_t ng) { return (static_cast<size_t>(ng) * 144 + 63) / 64 * 64; }
inline constexpr int64_t kQ4_Kx4Rows = 4, kQ4_Kx4Meta = 80;
constexpr size_t q4_Kx4_group_bytes(int64_t nb) { return (static_cast<size_t>(nb) * (512 + kQ4_Kx4Meta) + 63) / 64 * 64; }
void gemm_q4_Kx4_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                        int64_t n_act, float* Y, int64_t ldy);
void gemm_q4_0x8_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                        int64_t n_act, float* Y, int64_t ldy);

}  // namespace df::cpu
