// Grouped prefill GEMM over routed experts (matmul_id / matmul_id_swiglu of many rows):
// the tile kernel of gemm.cuh with each block tile's expert and x / y rows taken from a
// device table built after the slots are grouped by expert (ops/moe.cuh launch_moe_group),
// so no host round trip and the launch records into a CUDA graph.
//
//   for every used tile t = {e, p0, rows} and i < rows, r < W rows of one expert (m):
//     y[y_row[p0 + i], r] = sum_c W_e[r, c] * xh[x_row[p0 + i], c]                 (plain)
//     y[y_row[p0 + i], r] = silu(sum_c G_e[r, c] xh[..]) * (sum_c U_e[r, c] xh[..])  (swiglu)
//
// Tiles cover kGroupedBM padded rows of one expert: expert e's slots occupy padded rows
// 8 c_e .. 8 c_e + count_e - 1 (launch_moe_group's layout), its tiles start there every
// kGroupedBM rows. Every format of the tile kernel; numerics as gemm.cuh (f16 operands, f32
// sums): not the bits of the grouped matvec path (budget, not bits).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "quant/types.h"

namespace df::cudamv {
struct DevTables;
}

namespace df::cuda::gemm {

constexpr int kGroupedBM = 32;  // padded rows of a tile (~16 slots an expert at the 35B-A3B shape)

// Tiles for n_slots slots over E experts: sum_e ceil(count_e / BM) <= n_slots / BM + min(n_slots, E).
int64_t grouped_max_tiles(int64_t n_slots, int64_t E);

// tiles[t] = {e, p0, rows, 0} for the tiles of every expert (from counts [E], launch_moe_group's),
// in expert order; the rest of the max_tiles entries all -1 (unused). Two launches, no atomics.
void launch_grouped_tiles(const int32_t* counts, int64_t E, int64_t max_tiles, int4* tiles, cudaStream_t s);

struct GroupedArgs {
  GgmlType type;
  const uint8_t* const* table[2];  // stack tables: quant planes [E], then meta planes [E]; [1]: up (swiglu) or null
  int64_t n_expert;
  size_t q_row_bytes, m_row_bytes;
  int64_t rows, cols;              // one expert's weight rows (m) and cols (multiple of 64)
  const cudamv::DevTables* tables;
  const int4* tiles;               // launch_grouped_tiles
  int64_t max_tiles;
  const int32_t* x_row;            // padded row -> row of xh
  const int32_t* y_row;            // padded row -> row of y
  const __half* x;                 // xh: dense f16 [*, cols] (convert_x_f16)
  float* y;
  int64_t ys;                      // y row stride in floats
};

// The launch (swiglu when table[1]); false when the type is not supported (nothing launched).
bool grouped_gemm(const GroupedArgs& g, cudaStream_t s);

}  // namespace df::cuda::gemm
