// Internal to the CUDA backend: the GPU layouts of its weights, by the device address the
// Tensor of weight() carries, and the MoE ops' host and device buffers.
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <unordered_map>
#include <vector>

#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cuda {

// The GPU layouts of the weights, by the device address the Tensor of weight() carries.
struct PackedWeights {
  PackedWeights(bool int8_x, bool pdl, bool pipe = true, bool pipe_rows = true) : tables(int8_x, pdl, pipe, pipe_rows) {}
  cudamv::Context tables;                                   // IQ tables on this device (and the int8-x choice)
  std::unordered_map<const void*, cudamv::PackedWeight> by_data;
  int32_t* iota = nullptr;                                  // 0, 1, 2, ...: row ids of weight tiles
  gemm::Tuner gemm_tiles;                                   // the prefill GEMM's tile per shape
  int64_t iota_n = 0;
  // Resident expert stacks (weight_stack): by the stack's data, the device table of its
  // experts' planes (2 * n_expert pointers: quant plane of expert e at [e], meta at [n_expert + e]).
  std::unordered_map<const void*, const uint8_t**> expert_tables;
  ~PackedWeights() {
    if (iota) cudaFree(iota);
    for (auto& [k, t] : expert_tables) cudaFree(t);
  }
};


// The device table of a resident stack's experts (P: n_expert matrices of m rows one after
// another): 2 * n_expert plane pointers, quant plane of expert e at [e], meta at [n_expert + e].
const uint8_t** make_expert_table(const cudamv::PackedWeight& P, int64_t n_expert, int64_t m);

// matmul_id's buffers for calls of more than 8 rows: the routed ids on the host (pinned), and
// on the device the slot lists and the gathered activation and product rows of a call.
// Grown outside graph captures only.
struct MoeBuffers {
  int32_t* host_ids = nullptr;     // pinned
  size_t host_ids_n = 0;
  const void* ids_of = nullptr;    // the ids tensor host_ids was downloaded from ...
  int64_t ids_rows = -1, ids_cols = -1;
  uint64_t ids_epoch = ~0ull;      // ... at this mutation epoch of I32 device data
  uint64_t downloads = 0;          // downloads of routed ids so far
  void* dev = nullptr;             // lists, then gathered x, then gathered y
  size_t dev_bytes = 0;
  // The device grouping of one routing (matmul_id_grouped): counts [E], chunk_e [C],
  // slot_of [8 C], x_of [8 C], pos_of [n * k] (ops/moe.cuh launch_moe_group), C = chunks.
  int32_t* grp = nullptr;
  size_t grp_n = 0;                // int32s allocated
  const void* grp_of = nullptr;    // the ids tensor grouped ...
  int64_t grp_rows = -1, grp_cols = -1, grp_experts = -1, grp_chunks = 0;
  uint64_t grp_epoch = ~0ull;      // ... at this mutation epoch of I32 device data
  void* fused = nullptr;           // moe_experts_fused: ids, weights, gate, down of 8 rows
  size_t fused_bytes = 0;
  // Stacks' expert tables with a shared expert appended (key: stack, shared weight).
  std::map<std::pair<const void*, const void*>, const uint8_t* const*> ext_tables;
  void* gxy = nullptr;             // gathered x [8 C, cols], then the products [8 C, m]
  size_t gxy_bytes = 0;
  uint64_t grp_serial = 0;         // bumped by every new grouping
  // The grouped GEMM (CudaOptions::moe_gemm): its tile table (gemm/grouped.cuh) of grouping
  // tiles_serial, and x in f16.
  void* tiles = nullptr;
  size_t tiles_bytes = 0;
  uint64_t tiles_serial = ~0ull;
  void* xh = nullptr;
  size_t xh_bytes = 0;
  ~MoeBuffers();
};

}  // namespace df::cuda
