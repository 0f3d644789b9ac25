// Routed experts that stay in host memory, and the device cache they are brought into.
//
// A streamed stack (a MoE FFN's ffn_{gate,up,down}_exps) is repacked once at load into
// matvec/'s GPU layout, one packed matrix per expert, in pinned host memory. The cache is
// one device allocation cut into equal slots (the largest packed expert); a slot holds one
// (stack, expert). Eviction: least recently used. A miss is one host-to-device copy on the
// cache's own stream; the compute stream waits for that copy's event before its kernels read
// the slot, and the copy stream waits for the event recorded after the last kernel that read
// a slot before overwriting it: copies of one call overlap the compute of the experts before.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "quant/types.h"

namespace df::cuda {

class CudaContext;

struct ExpertStack {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0, n_expert = 0;   // each expert: [rows, cols]
  size_t q_row_bytes = 0, m_row_bytes = 0;    // the packed layout of one expert (matvec/)
  size_t expert_bytes = 0;                    // packed bytes of one expert
  uint8_t* host = nullptr;                    // pinned: n_expert * expert_bytes
  int id = 0;
};

struct ExpertCacheStats {
  uint64_t hits = 0, misses = 0;       // expert lookups of matmul_id
  uint64_t bytes_uploaded = 0;         // host -> device bytes of the misses
  uint64_t capacity_bytes = 0;         // device bytes of the cache (0 until first used)
  int64_t slots = 0;                   // experts it holds
  uint64_t host_bytes = 0;             // pinned bytes of every streamed stack
  int64_t stacks = 0;
};

class ExpertCache {
 public:
  // capacity_bytes: the device bytes for slots; 0: what is free at first use less `margin`.
  ExpertCache(const CudaContext& ctx, uint64_t capacity_bytes, uint64_t margin);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Repacks a stack of n_expert [rows, cols] matrices of ggml blocks into pinned memory.
  const ExpertStack* add_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host_blocks);
  // The stack whose key (Tensor::data of weight_stack) is `key`, or null.
  const ExpertStack* find(const void* key) const;

  // Slots one call may hold at once (the cache's size in experts).
  int64_t slots();
  // Makes expert e of s resident in a slot that no other acquire since the last
  // release_all() holds, enqueuing the upload on a miss (on the cache's stream). Returns the
  // slot's device memory; *slot names it for wait_ready.
  uint8_t* acquire(const ExpertStack& s, int64_t e, int* slot);
  // Makes `compute` wait until the slot's upload has landed (call before its first kernel).
  void wait_ready(int slot, cudaStream_t compute);
  // After the kernels of every acquired slot were launched on `compute`: marks the slots
  // free to be overwritten once those kernels finish.
  void release_all(cudaStream_t compute);

  ExpertCacheStats stats() const;
  void reset_stats();

 private:
  struct Slot {
    uint64_t key = ~0ull;  // stack id << 32 | expert
    cudaEvent_t ready = nullptr, free = nullptr;
    bool used_free = false;  // `free` has been recorded at least once
    bool held = false;       // acquired since the last release_all
    std::list<int>::iterator lru;
  };
  void allocate();
  const CudaContext& ctx_;
  uint64_t want_bytes_, margin_;
  std::vector<std::unique_ptr<ExpertStack>> stacks_;
  std::unordered_map<const void*, const ExpertStack*> by_key_;
  size_t slot_bytes_ = 0;
  uint8_t* dev_ = nullptr;
  std::vector<Slot> slots_;
  std::list<int> lru_;  // front: most recently used
  std::unordered_map<uint64_t, int> where_;
  std::vector<int> held_;
  cudaStream_t copy_ = nullptr;
  ExpertCacheStats st_;
};

}  // namespace df::cuda
