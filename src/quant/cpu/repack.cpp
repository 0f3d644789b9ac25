// Repacked layouts: which formats have one, their sizes, the copy from the file's planar
// rows (plain byte moves, no ISA), and the dispatch to the ISA kernels (repack.h).
#include "quant/cpu/repack.h"

#include <cstring>
#include <string>

#include "common/error.h"
#include "quant/blocks.h"
#include "quant/formats_kquant.h"

namespace df::cpu {

bool repack_supported(Isa isa, GgmlType t, int64_t n) {
  if (isa != Isa::AVX512 || static_cast<int>(best_isa()) < static_cast<int>(Isa::AVX512)) return false;
  if (t == GgmlType::Q4_0) return n > 0 && n % kQK4 == 0;
  if (t == GgmlType::Q8_0) return n > 0 && n % kQK8_0 == 0;
  if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) return n > 0 && n % kQK_K == 0;
  return false;
}

int64_t repack_group_rows(GgmlType t) {
  if (t == GgmlType::Q4_0 || t == GgmlType::Q8_0) return kQ4_0x16Rows;
  if (t == GgmlType::Q4_K || t == GgmlType::Q6_K) return kQ4_Kx16Rows;
  throw Error("no repacked layout for type " + std::string(type_name(t)));
}

int64_t repack_min_rows(GgmlType t) { return t == GgmlType::Q6_K || t == GgmlType::Q4_K ? 9 : 1; }

size_t repacked_bytes(GgmlType t, int64_t n, int64_t rows) {
  const int64_t g = repack_group_rows(t);
  const size_t gb = t == GgmlType::Q4_0   ? q4_0x16_group_bytes(n / kQK4)
                    : t == GgmlType::Q8_0 ? q8_0x16_group_bytes(n / kQK8_0)
                    : t == GgmlType::Q4_K ? q4_Kx16_group_bytes(n / kQK_K)
                                          : q6_Kx16_group_bytes(n / kQK_K);
  return gb * static_cast<size_t>((rows + g - 1) / g);
}

namespace {

// Groups of 16 rows of nb blocks (q bytes of quants and m of scales a block, for the group)
// from planar rows [r0, r1): put(row block w, row r in the group, quants, scales) writes
// one row's block; padding rows stay zero.
template <class Block, class Put>
void repack_x16(int64_t nb, int64_t q, int64_t m, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0,
                int64_t r1, uint8_t* dst, Put put) {
  constexpr int64_t G = 16;
  const size_t gb = x16_group_bytes(nb, q, m);
  for (int64_t grp = r0 / G; grp * G < r1; ++grp) {
    uint8_t* out = dst + gb * static_cast<size_t>(grp);
    std::memset(out, 0, gb);
    for (int64_t r = 0; r < G && grp * G + r < rows; ++r) {
      const auto* w = reinterpret_cast<const Block*>(src + static_cast<size_t>(grp * G + r) * src_stride);
      for (int64_t b = 0; b < nb; ++b) {
        const BlockOffsets o = block_offsets(b, nb, q, m);
        put(w[b], static_cast<int>(r), out + o.q, out + o.m);
      }
    }
  }
}

void repack_q4_0(int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1, uint8_t* dst) {
  repack_x16<BlockQ4_0>(n / kQK4, kQ4_0x16Q, kQ4_0x16Meta, rows, src, src_stride, r0, r1, dst,
                        [](const BlockQ4_0& w, int r, uint8_t* qs, uint8_t* meta) {
                          for (int j = 0; j < 4; ++j) std::memcpy(qs + 64 * j + 4 * r, w.qs + 4 * j, 4);
                          std::memcpy(meta + 2 * r, &w.d, 2);
                        });
}

void repack_q8_0(int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1, uint8_t* dst) {
  repack_x16<BlockQ8_0>(n / kQK8_0, kQ8_0x16Q, kQ8_0x16Meta, rows, src, src_stride, r0, r1, dst,
                        [](const BlockQ8_0& w, int r, uint8_t* qs, uint8_t* meta) {
                          for (int j = 0; j < 8; ++j)
                            for (int e = 0; e < 4; ++e)
                              qs[64 * j + 4 * r + e] = static_cast<uint8_t>(static_cast<uint8_t>(w.qs[4 * j + e]) ^ 0x80u);
                          std::memcpy(meta + 2 * r, &w.d, 2);
                        });
}

void repack_q4_K(int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1, uint8_t* dst) {
  repack_x16<BlockQ4_K>(n / kQK_K, kQ4_Kx16Q, kQ4_Kx16Meta, rows, src, src_stride, r0, r1, dst,
                        [](const BlockQ4_K& w, int r, uint8_t* qs, uint8_t* meta) {
                          for (int p = 0; p < 4; ++p)
                            for (int j = 0; j < 8; ++j) std::memcpy(qs + (p * 8 + j) * 64 + 4 * r, w.qs + 32 * p + 4 * j, 4);
                          for (int v = 0; v < 8; ++v) {
                            uint8_t sc, m;
                            quant::scale_min_k4(w.scales, v, sc, m);
                            meta[16 * v + r] = sc;
                            meta[128 + 32 * (v / 2) + 2 * r + v % 2] = m;
                          }
                          std::memcpy(meta + 256 + 2 * r, &w.d, 2);
                          std::memcpy(meta + 288 + 2 * r, &w.dmin, 2);
                        });
}

void repack_q6_K(int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1, uint8_t* dst) {
  repack_x16<BlockQ6_K>(n / kQK_K, kQ6_Kx16Q, kQ6_Kx16Meta, rows, src, src_stride, r0, r1, dst,
                        [](const BlockQ6_K& w, int r, uint8_t* qs, uint8_t* meta) {
                          for (int c = 0; c < 2; ++c)
                            for (int s = 0; s < 8; ++s) {
                              for (int h = 0; h < 2; ++h)
                                std::memcpy(qs + ((c * 2 + h) * 8 + s) * 64 + 4 * r, w.ql + 64 * c + 32 * h + 4 * s, 4);
                              std::memcpy(qs + 2048 + (c * 8 + s) * 64 + 4 * r, w.qh + 32 * c + 4 * s, 4);
                            }
                          for (int sub = 0; sub < 16; ++sub) meta[16 * sub + r] = static_cast<uint8_t>(w.scales[sub]);
                          std::memcpy(meta + 256 + 2 * r, &w.d, 2);
                        });
}

}  // namespace

void repack_rows(GgmlType t, int64_t n, int64_t rows, const uint8_t* src, size_t src_stride, int64_t r0, int64_t r1,
                 uint8_t* dst) {
  const int64_t G = repack_group_rows(t);
  if (r0 % G != 0 || (r1 % G != 0 && r1 != rows) || r0 < 0 || r1 > rows || r0 > r1)
    throw Error("repack_rows: rows [" + std::to_string(r0) + ", " + std::to_string(r1) + ") do not fall on groups");
  if (t == GgmlType::Q4_0)
    repack_q4_0(n, rows, src, src_stride, r0, r1, dst);
  else if (t == GgmlType::Q8_0)
    repack_q8_0(n, rows, src, src_stride, r0, r1, dst);
  else if (t == GgmlType::Q4_K)
    repack_q4_K(n, rows, src, src_stride, r0, r1, dst);
  else
    repack_q6_K(n, rows, src, src_stride, r0, r1, dst);
}

void gemm_repacked(Isa isa, GgmlType t, int64_t n, const uint8_t* Wr, int64_t rows, int64_t i0, int64_t i1,
                   const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  if (!repack_supported(isa, t, n)) throw Error("gemm_repacked: no repacked kernel for this type and ISA");
  if (i0 < 0 || i1 > rows || i0 > i1) throw Error("gemm_repacked: row range outside the matrix");
  if (i0 == i1 || n_act <= 0) return;
  if (t == GgmlType::Q4_0)
    gemm_q4_0x16_avx512(n, Wr, i0, i1, act, act_stride, n_act, Y, ldy);
  else if (t == GgmlType::Q8_0)
    gemm_q8_0x16_avx512(n, Wr, i0, i1, act, act_stride, n_act, Y, ldy);
  else if (t == GgmlType::Q4_K)
    gemm_q4_Kx16_avx512(n, Wr, i0, i1, act, act_stride, n_act, Y, ldy);
  else
    gemm_q6_Kx16_avx512(n, Wr, i0, i1, act, act_stride, n_act, Y, ldy);
}

}  // namespace df::cpu
