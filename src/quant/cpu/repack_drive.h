// The loop every repacked kernel runs (repack_avx512.cpp, repack_kquant_avx512.cpp): groups
// of 16 weight rows x tiles of up to kCols tokens, the group's lanes outside [i0, i1) masked.
// Included only by the AVX-512 translation units (internal linkage through their lambdas).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace df::cpu::repack {

// tile(C, group, a[C] (token c's blocks), c0, row0, rows) for every group of rows meeting
// [i0, i1) and every tile of tokens [c0, c0 + C); row0 = the group's first row, rows = the
// lanes to store.
template <class ABlock, int kCols, class Tile>
void drive_x16(const uint8_t* Wr, size_t group_bytes, int64_t i0, int64_t i1, const uint8_t* act, size_t act_stride,
               int64_t n_act, Tile&& tile) {
  constexpr int64_t G = 16;
  for (int64_t grp = i0 / G; grp * G < i1; ++grp) {
    const uint8_t* w = Wr + group_bytes * static_cast<size_t>(grp);
    const int64_t r0 = std::max(i0, grp * G), r1 = std::min(i1, grp * G + G);
    const __mmask16 rows = static_cast<__mmask16>(((1u << (r1 - r0)) - 1u) << (r0 - grp * G));
    for (int64_t c0 = 0; c0 < n_act; c0 += kCols) {
      const int C = static_cast<int>(n_act - c0 < kCols ? n_act - c0 : kCols);
      const ABlock* a[kCols];
      for (int c = 0; c < C; ++c) a[c] = reinterpret_cast<const ABlock*>(act + static_cast<size_t>(c0 + c) * act_stride);
      tile(C, w, a, c0, grp * G, rows);
    }
  }
}

}  // namespace df::cpu::repack
