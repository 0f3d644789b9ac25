// Load-time repacked weight layouts (issue 15): a weight matrix copied once, at load, into a
// layout of interleaved rows, so that one stream of memory feeds several outputs and the
// integer products run on full 512-bit vectors, for decode (one activation row) and prefill
// (tiles of rows x tokens) alike. The CPU backend keeps the file's planar rows for every other
// use (get_rows, views) and multiplies through the repacked copy (flag --cpu-repack).
//
// Numerics: every output has one f32 summation order whatever the tile, the number of
// activation rows (decode, verify, prefill) or the row range (tests/unit/test_repack.cpp):
//   Q4_0: llama.cpp's repacked (Q4_0_8x8) order on AVX2 / AVX-512: per 32-element block the
//         exact integer sum of the block, acc = fma(fp16(d_w) * fp16(d_a), float(isum), acc),
//         one f32 chain per output, no horizontal sum.
//   Q8_0: as Q4_0 (not llama.cpp's order on x86, which runs Q8_0 through vec_dot and
//         llamafile's tiles: 8-lane sums; the model tests hold it to the same budgets).
//   Q4_K: per super-block the exact integer sums isum = sum_v sc_v * (sub-block v's products)
//         and msum = sum_v m_v * (sub-block v's activation sum), then
//         acc = fma(fp16(d_w) * d_a, float(isum), acc), accm = fma(fp16(dmin_w) * d_a,
//         float(msum), accm); the output is acc - accm.
//   Q6_K: per super-block the exact isum = sum_sub sc_sub * (sub-block's products, q - 32),
//         acc = fma(fp16(d_w) * d_a, float(isum), acc); the output is acc.
//   All three are other bits than the planar vec_dot (ggml's 8-lane order, bit exact with
//   llama.cpp's vec_dot): the CPU model tests against llama.cpp hold them to the same budgets.
//
// Layouts:
// A group of rows holds its blocks in runs of 4: the run's quants, then the run's scales
// (block_offsets), so that a group is one stream of memory (quants and scales in two regions
// of the group measured ~1.4x slower than the planar rows from DRAM); groups padded to 64 bytes
// (the kernels load unaligned: any buffer works; 64-byte aligned is faster).
//   Q4_0 x16 (AVX-512): rows in groups of 16 (the last group padded with zero rows); a block's
//     quants qs[j 0..3][row][4] (nibble bytes 4j .. 4j+3 of each of the 16 rows, 256 bytes),
//     its scales d[row] (fp16, 32 bytes).
//   Q8_0 x16 (AVX-512): rows in groups of 16 (padded with zero rows); a block's quants
//     qs[j 0..7][row][4] (bytes 4j .. 4j+3 of each row, stored +128: unsigned; 512 bytes),
//     its scales d[row] (fp16, 32 bytes).
//   Q4_K x16 (AVX-512): rows in groups of 16 (padded with zero rows); a super-block's quants
//     qs[p 0..3][j 0..7][row][4] (row bytes 32p + 4j .. +3: the low nibbles are sub-block
//     2p's elements 4j .. 4j+3, the high nibbles sub-block 2p+1's; 2048 bytes), its scales
//     (320 bytes): sc[v 0..7][row] and m[j 0..3][row][2] (m_2j, m_2j+1) (the decoded 6-bit
//     scales and mins), d[row], dmin[row] (fp16).
//   Q6_K x16 (AVX-512): rows in groups of 16; a super-block's quants (3072 bytes) ql[c 0..1]
//     [h 0..1][s 0..7][row][4] (ql bytes 64c + 32h + 4s .. +3), then qh[c][s][row][4] (qh bytes
//     32c + 4s .. +3), its scales (288 bytes) sc[sub 0..15][row] (int8), d[row] (fp16).
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
// Activation rows of a call from which the repacked kernel is used: 1, or 9 for Q6_K, whose
// planar decode kernel reads memory faster (measured, 151936 x 1024 from DRAM: 7.3 vs 9.3 ms
// a GEMV; prefill tiles: the repacked kernel), and for Q4_K, whose repacked order at one row
// moved a router near-tie of the qwen35moe Q4_K_M reference test over its budget (logits
// 1.2e-3 from llama.cpp's; bench/cpu/results/repack_default_2026-12-01_cpudec.md); its planar
// decode over a huge-page copy measured 80 tok/CPU-s in a Q4_K_M model against 69 of the
// repacked one on 4 KiB pages (repacked on huge pages not measured). Calls of fewer rows (decode and verify)
// then run the planar row-exact kernels, so a row's bits stay independent of the row count up
// to 8 rows; larger calls (prefill) sum in the repacked order, as Q8_0's prefill tiles do.
int64_t repack_min_rows(GgmlType t);
void repack_rows(GgmlType t, int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1,
                 uint8_t* dst);
// Kernels::gemm's contract over a repacked matrix of `rows` rows (any 0 <= i0 < i1 <= rows):
// Y[r * ldy + i] = dot(W row i, act row r), act rows in vec_dot_type(t) as for the planar
// kernels. One order per output (above), so this one kernel serves decode, verify and prefill.
void gemm_repacked(Isa isa, GgmlType t, int64_t n, const uint8_t* Wr, int64_t rows, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy);

// Internal: the layouts (repack.cpp) and their kernels (repack_avx512.cpp,
// repack_kquant_avx512.cpp).
// Offsets in a group of block b's quants (q bytes a block) and scales (m bytes), of nb blocks.
struct BlockOffsets {
  size_t q, m;
};
constexpr BlockOffsets block_offsets(int64_t b, int64_t nb, int64_t q, int64_t m) {
  const int64_t run = b / 4 * 4, in_run = nb - run < 4 ? nb - run : 4;
  const size_t base = static_cast<size_t>(run * (q + m));
  return {base + static_cast<size_t>((b - run) * q), base + static_cast<size_t>(in_run * q + (b - run) * m)};
}
inline constexpr int64_t kQ4_0x16Rows = 16, kQ4_0x16Q = 256, kQ4_0x16Meta = 32;
// Bytes of a group of nb blocks of q bytes of quants and m of scales, padded to 64.
constexpr size_t x16_group_bytes(int64_t nb, int64_t q, int64_t m) {
  return (static_cast<size_t>(nb * (q + m)) + 63) / 64 * 64;
}
constexpr size_t q4_0x16_group_bytes(int64_t ng) { return x16_group_bytes(ng, kQ4_0x16Q, kQ4_0x16Meta); }
inline constexpr int64_t kQ8_0x16Q = 512, kQ8_0x16Meta = 32;
constexpr size_t q8_0x16_group_bytes(int64_t ng) { return x16_group_bytes(ng, kQ8_0x16Q, kQ8_0x16Meta); }
inline constexpr int64_t kQ4_Kx16Rows = 16, kQ4_Kx16Q = 2048, kQ4_Kx16Meta = 320;
constexpr size_t q4_Kx16_group_bytes(int64_t nb) { return x16_group_bytes(nb, kQ4_Kx16Q, kQ4_Kx16Meta); }
inline constexpr int64_t kQ6_Kx16Q = 3072, kQ6_Kx16Meta = 288;
constexpr size_t q6_Kx16_group_bytes(int64_t nb) { return x16_group_bytes(nb, kQ6_Kx16Q, kQ6_Kx16Meta); }
void gemm_q6_Kx16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy);
void gemm_q4_Kx16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy);
void gemm_q8_0x16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy);
void gemm_q4_0x16_avx512(int64_t n, const uint8_t* Wr, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
                         int64_t n_act, float* Y, int64_t ldy);

}  // namespace df::cpu
