// Internal to the CUDA backend: the GPU layouts of its weights, by the device address the
// Tensor of weight() carries, and the MoE ops' host and device buffers.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cuda {

// The GPU layouts of the weights, by the device address the Tensor of weight() carries.
struct PackedWeights {
  PackedWeights(bool int8_x, bool pdl) : tables(int8_x, pdl) {}
  cudamv::Context tables;                                   // IQ tables on this device (and the int8-x choice)
  std::unordered_map<const void*, cudamv::PackedWeight> by_data;
  int32_t* iota = nullptr;                                  // 0, 1, 2, ...: row ids of weight tiles
  gemm::Tuner gemm_tiles;                                   // the prefill GEMM's tile per shape
  int64_t iota_n = 0;
  ~PackedWeights() {
    if (iota) cudaFree(iota);
  }
};


// matmul_id's buffers: the routed ids on the host (pinned), and on the device the slot lists
// and the gathered activation and product rows of a call. Grown outside graph captures only.
struct MoeBuffers {
  int32_t* host_ids = nullptr;     // pinned
  size_t host_ids_n = 0;
  const void* ids_of = nullptr;    // the ids tensor host_ids was downloaded from ...
  int64_t ids_rows = -1, ids_cols = -1;
  uint64_t ids_epoch = ~0ull;      // ... at this mutation epoch of I32 device data
  void* dev = nullptr;             // lists, then gathered x, then gathered y
  size_t dev_bytes = 0;
  ~MoeBuffers();
};

}  // namespace df::cuda
