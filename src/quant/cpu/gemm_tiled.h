// ISA-independent tiling of Y = W * act^T over a register-blocked microkernel.
// Included only by the ISA translation units; always instantiated with microkernel types
// from an anonymous namespace there, so every instantiation has internal linkage and
// cannot be merged across translation units compiled for different ISAs.
//
// A microkernel MK provides
//   static constexpr int kRows, kCols;   // largest tile: weight rows x activation rows
//   static constexpr int kRowsDecode;    // weight rows per tile when n_act == 1
//   template <int R, int C>              // 1 <= R <= max(kRows, kRowsDecode), 1 <= C <= kCols
//   static void tile(int64_t n, const uint8_t* const* w /*[R] weight rows*/,
//                    const uint8_t* const* a /*[C] activation rows*/, float* out /*[R*C]*/);
//   which writes out[r * C + c] = dot(w[r], a[c]) over n elements;
//   optionally static constexpr bool kShapeFree = true: every output of every tile shape has
//   the bits of the 1 x 1 tile (one f32 order per output), so gemm is row exact (registry.h).
//
// RowExact<MK, Rows, Cols> turns a microkernel whose f32 order depends on the tile (several
// accumulator chains in small tiles) into a row-exact one: every tile of it runs MK's tile
// code with the 1 x 1 tile's chain count MK::kUnrollOne, so each output gets the bits of the
// decode kernel while a weight row is read once for up to Cols activation rows. MK provides
//   static constexpr int kUnrollOne;      // the 1 x 1 tile's accumulator chains
//   template <int R, int C, int U> static void tile_u(...);   // tile<R, C> with U chains
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace df::cpu::tiled {

using TileFn = void (*)(int64_t n, const uint8_t* const* w, const uint8_t* const* a, float* out);

template <class MK>
constexpr int max_rows() {
  return MK::kRows > MK::kRowsDecode ? MK::kRows : MK::kRowsDecode;
}

// table.fn[R - 1][C - 1] = &MK::tile<R, C>: run-time tile edges to compile-time shapes.
template <class MK>
struct TileTable {
  TileFn fn[max_rows<MK>()][MK::kCols];
};

template <class MK, int R, int... Cs>
constexpr void fill_tile_row(TileTable<MK>& t, std::integer_sequence<int, Cs...>) {
  ((t.fn[R - 1][Cs] = &MK::template tile<R, Cs + 1>), ...);
}

template <class MK, int... Rs>
constexpr TileTable<MK> make_tile_table(std::integer_sequence<int, Rs...>) {
  TileTable<MK> t{};
  (fill_tile_row<MK, Rs + 1>(t, std::make_integer_sequence<int, MK::kCols>{}), ...);
  return t;
}

template <class MK, int Rows, int Cols>
struct RowExact {
  static constexpr int kRows = Rows, kCols = Cols, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* w, const uint8_t* const* a, float* out) {
    MK::template tile_u<R, C, MK::kUnrollOne>(n, w, a, out);
  }
};

// Y[r * ldy + i] = dot(W row i, act row r), i in [i0, i1), r in [0, n_act).
// Loop order: a tile of weight rows (a few KB, stays in L1/L2) is loaded once and swept over
// all activation rows, so each weight byte comes from memory once per call.
template <class MK>
void gemm(int64_t n, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
          const uint8_t* act, size_t act_stride, int64_t n_act, float* Y, int64_t ldy) {
  static constexpr TileTable<MK> table =
      make_tile_table<MK>(std::make_integer_sequence<int, max_rows<MK>()>{});
  constexpr int kMaxRows = max_rows<MK>();
  if constexpr (MK::kRowsDecode == 1) {
    if (n_act == 1) {  // decode: one weight row after another
      for (int64_t i = i0; i < i1; ++i) {
        const uint8_t* w = W + static_cast<size_t>(i) * w_stride;
        table.fn[0][0](n, &w, &act, Y + i);
      }
      return;
    }
  }
  const int64_t rows_per_tile = n_act == 1 ? MK::kRowsDecode : MK::kRows;
  for (int64_t i = i0; i < i1; i += rows_per_tile) {
    const int R = static_cast<int>(i1 - i < rows_per_tile ? i1 - i : rows_per_tile);
    const uint8_t* w[kMaxRows];
    for (int r = 0; r < R; ++r) w[r] = W + static_cast<size_t>(i + r) * w_stride;
    for (int64_t c0 = 0; c0 < n_act; c0 += MK::kCols) {
      const int C = static_cast<int>(n_act - c0 < MK::kCols ? n_act - c0 : MK::kCols);
      const uint8_t* a[MK::kCols];
      for (int c = 0; c < C; ++c) a[c] = act + static_cast<size_t>(c0 + c) * act_stride;
      float out[kMaxRows * MK::kCols];
      table.fn[R - 1][C - 1](n, w, a, out);
      for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) Y[(c0 + c) * ldy + i + r] = out[r * C + c];
    }
  }
}

}  // namespace df::cpu::tiled
