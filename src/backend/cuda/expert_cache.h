// Routed experts that stay in host memory, and the device cache that holds some of them.
//
// A streamed stack (a MoE FFN's ffn_{gate,up,down}_exps) is repacked once at load into
// matvec/'s GPU layout, one packed matrix per expert ([quant plane | meta plane]), in pinned
// host memory mapped into the device's address space. Every stack has a device table of its
// experts' plane pointers (matvec.cuh MatvecFusion::table): an expert in a cache slot points
// into the slot, any other one into its mapped host copy, which the kernels read in place
// over the bus. So a step never waits for the host: the routed ids stay on the device, a
// decode step is one CUDA graph whatever is cached, and the same bytes give the same bits
// from either place (greedy output equals the resident run's for any cache size).
//
// Placement (which experts are in the slots): the cache is one device allocation cut into
// equal slots (the largest packed expert). At first use the slots are filled with experts
// 0, 1, ... of every stack in turn (an equal share per stack). Then, at most every
// kReplaceEvery calls of maintain() (between steps, outside graph captures), the device's
// per-expert use counts (counted by every matmul_id launch) are read back asynchronously
// and the placement moves towards the most used experts: score = 3/4 * score + new uses
// (least frequently used, with decay); a non-resident expert replaces the resident one of
// lowest score when its score is more than twice that one's plus two, at most
// 1/kMaxSwapShare of the slots per round (with routing of no locality, as random weights
// route, replacements gain nothing and their copies compete with the reads of misses). A replacement is: the victim's table entries point
// back to host memory (on the compute stream, so later kernels read the host copy); the
// copy stream waits for that, uploads the new expert into the slot, then writes its table
// entries. Kernels running meanwhile read either copy: both hold the same bytes. The compute
// stream never waits for a copy.
//
// File tier (the cache made with from_file; CudaOptions::expert_source): no host copy. A
// stack keeps where its ggml blocks lie in the model file; an expert is either in a slot or
// nowhere (its table entries null). Before a launch reads a stack, acquire() gets the routed
// ids on the host (the backend downloads them: one sync per MoE layer; decode steps run
// eagerly, no graphs) and brings every expert the call routes to into a slot: slots not
// pinned by the call are taken empty ones first, then by the lowest score (the same
// least-frequently-used-with-decay score: per stack, score = 3/4 * score per call of that
// stack + 1 per use; ties to the least recently used). The missed experts are read by a pool
// of reader threads (pread, O_DIRECT where the file system takes it, into aligned buffers),
// repacked on the host into pinned staging (matvec/'s layout), and uploaded on the copy
// stream once every kernel queued before has run (the victims may still be read); the table
// entries are written after them and the compute stream waits for that. Reads of one call
// overlap each other (kReaders threads) and the uploads of the previous wave (waves of
// kWave experts, two sets of staging). A call whose experts outnumber the slots is a
// df::Error naming the bytes needed. The same packed bytes as the host tier's, so the same
// bits: greedy output equals the resident run's for any cache size.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "quant/types.h"

namespace df {
class RangeReader;
}

namespace df::cuda {

class CudaContext;

struct ExpertStack {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0, n_expert = 0;   // each expert: [rows, cols]
  size_t q_row_bytes = 0, m_row_bytes = 0;    // the packed layout of one expert (matvec/)
  size_t expert_bytes = 0;                    // packed bytes of one expert
  uint8_t* host = nullptr;                    // pinned, mapped: n_expert * expert_bytes (host tier)
  uint8_t* host_dev = nullptr;                // the same memory's device address (file tier: the
                                              // slots' base, a non-null geometry address never read)
  // File tier: expert e's ggml blocks are src_bytes at file offset file_offset + e * src_bytes
  // of `file`, or (a stack from memory that is no registered file) at src + e * src_bytes.
  size_t src_bytes = 0;
  const RangeReader* file = nullptr;
  uint64_t file_offset = 0;
  const uint8_t* src = nullptr;
  int64_t round = 0;                          // file tier: routings looked up in this stack so far
  uint64_t counted_routing = 0;               // file tier: the last one
  const uint8_t** table = nullptr;            // device: 2 * n_expert plane pointers
  uint32_t* uses = nullptr;                   // device: lookups per expert (cumulative)
  uint32_t* uses_host = nullptr;              // pinned: their last download
  int64_t count0 = 0;                         // this stack's first entry of the scores
  int id = 0;
};

struct ExpertCacheStats {
  uint64_t hits = 0, misses = 0;       // expert lookups of matmul_id (a miss reads host memory)
  uint64_t bytes_in_place = 0;         // bytes of missed experts, read from host memory in place
  uint64_t bytes_uploaded = 0;         // host -> device bytes of placement copies
  uint64_t replacements = 0;           // experts copied into a slot
  uint64_t capacity_bytes = 0;         // device bytes of the cache (0 until first used)
  int64_t slots = 0;                   // experts it holds
  uint64_t host_bytes = 0;             // pinned bytes of every streamed stack
  int64_t stacks = 0;
  // File tier.
  bool from_file = false;
  bool direct = false;                 // reads bypassed the page cache (O_DIRECT)
  uint64_t expert_bytes = 0;           // packed bytes of every streamed stack (none on the host)
  uint64_t loads = 0;                  // experts read into a slot
  uint64_t bytes_from_disk = 0;        // ggml bytes of them read from the file
  uint64_t bytes_from_memory = 0;      // ggml bytes of them copied from a mapping (no file)
  double read_seconds = 0;             // wall time of the reading waves (reads and repacking)
  double stall_seconds = 0;            // host time in acquire() (reads, repacking, uploads)
  uint64_t acquires = 0, syncs = 0;    // calls that needed experts; calls that read any
};

class ExpertCache {
 public:
  // capacity_bytes: the device bytes for slots; 0: at first use, what is free less `margin`, or
  // with a budget (> 0), the budget less what the backend took since it had free_at_start
  // free, less `margin` (at most what is free less 256 MiB).
  // from_file: the file tier (above).
  ExpertCache(const CudaContext& ctx, uint64_t capacity_bytes, uint64_t margin, uint64_t budget = 0,
              uint64_t free_at_start = 0, bool from_file = false);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Repacks a stack of n_expert [rows, cols] matrices of ggml blocks into pinned memory (a
  // stack added after the first use is placed from the next round of replacements on).
  // File tier: file (null: read host_blocks, a mapping) and the stack's offset in it; nothing
  // is read at load.
  const ExpertStack* add_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host_blocks,
                               const RangeReader* file = nullptr, uint64_t file_offset = 0);
  bool from_file() const { return from_file_; }
  // File tier: brings the experts ids[0 .. n) (entries < 0 skipped) of each stack into slots
  // and makes the compute stream wait for them (see above). lookup: counts hits and misses
  // and the stacks' rounds, once per `routing` (a serial of the ids' download; 0: always);
  // false (a prefetch): returns false, loading nothing, when they do not fit in the slots
  // together (lookup: a df::Error). Not inside a graph capture. The host tier: returns true.
  bool acquire(const ExpertStack* const* stacks, int n_stacks, const int32_t* ids, int64_t n, bool lookup,
               uint64_t routing = 0);
  // The stack whose key (Tensor::data of weight_stack) is `key`, or null.
  const ExpertStack* find(const void* key) const;

  // Allocates the slots and queues the first placement (once; not inside a graph capture).
  void ensure_ready();
  bool ready() const { return dev_ != nullptr; }
  // The planes of expert e that a kernel launched now on the compute stream may read: its
  // slot once its upload is known to have landed, else its host copy. *resident: which one.
  const uint8_t* planes(const ExpertStack& s, int64_t e, bool* resident) const;
  // Counts a launch's lookups on the device (stream-ordered): uses per expert, hits, misses
  // (negative ids: unused chunks of a grouped launch, not counted).
  void count(const ExpertStack& s, const int32_t* ids, int64_t n_slots, cudaStream_t compute);
  // Counts a lookup made on the host (the many-row path, which reads the placement itself).
  void count_host(const ExpertStack& s, bool resident);
  // Between steps: advances the placement (see above). Never waits; not inside a capture.
  void maintain();

  // Synchronises the compute stream (reads the device counters). Nothing else ever waits for a
  // transfer: the cost of misses is the time the kernels take to read host memory.
  ExpertCacheStats stats();
  void reset_stats();

  static constexpr int kReplaceEvery = 4;
  static constexpr int kReaders = 16;  // file tier: reader threads (queue depth of the reads)
  static constexpr int kWave = 32;     // file tier: experts per wave of reads
  static constexpr int kMaxSwapShare = 128;  // at most slots / 128 (and >= 1) replacements a round

 private:
  struct Slot {
    int stack = -1;
    int64_t expert = -1;
    bool landed = true;          // the upload into it is known to be complete
    cudaEvent_t ready = nullptr;  // recorded after its upload and table write
  };
  void allocate();
  void place(int slot, int stack, int64_t e);  // queue the upload of (stack, e) into slot
  void refresh_landed();
  void process_counts();
  struct Load {
    int stack = 0;
    int64_t expert = 0;
    int slot = 0;
  };
  void load_wave(const std::vector<Load>& wave, size_t first, size_t count, int set);
  void start_readers();
  const CudaContext& ctx_;
  bool from_file_ = false;
  uint64_t want_bytes_, margin_, budget_, free_at_start_;
  std::vector<std::unique_ptr<ExpertStack>> stacks_;
  std::unordered_map<const void*, const ExpertStack*> by_key_;
  size_t slot_bytes_ = 0;
  uint8_t* dev_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<std::vector<int>> slot_of_;  // per stack, per expert: its slot or -1
  // Device counters: hits, misses, bytes read in place (the uses are per stack).
  unsigned long long* dev_stats_ = nullptr;
  int64_t n_counts_ = 0;                   // experts of every stack
  std::vector<uint32_t> last_counts_;
  std::vector<float> score_;
  cudaEvent_t counts_ready_ = nullptr;
  bool counts_pending_ = false;
  int calls_ = 0;
  uint64_t host_hits_ = 0, host_misses_ = 0, host_bytes_in_place_ = 0;
  cudaEvent_t evicted_ = nullptr;
  cudaStream_t copy_ = nullptr;
  ExpertCacheStats st_;
  // File tier.
  std::vector<int64_t> last_round_;        // per expert (global index): its last lookup's round
  std::vector<uint64_t> pin_;              // per slot: the acquire() that needs it
  std::vector<uint64_t> seen_;             // per expert: the acquire() that listed it
  uint64_t serial_ = 0;
  std::vector<uint8_t> fresh_;             // per expert: loaded by a prefetch, not yet looked up
  uint8_t* stage_ = nullptr;               // pinned: 2 sets of kWave packed experts
  cudaEvent_t stage_done_[2] = {nullptr, nullptr};
  bool stage_pending_[2] = {false, false};
  void* upd_host_ = nullptr;               // pinned: table writes (entry address, value)
  void* upd_dev_ = nullptr;
  size_t upd_cap_ = 0;                     // pairs
  cudaEvent_t upd_done_ = nullptr;
  bool upd_pending_ = false;
  cudaEvent_t loaded_ = nullptr;
  struct Readers;                          // the reader pool (expert_file_tier.cu)
  struct DropReaders {
    void operator()(Readers* r) const;
  };
  std::unique_ptr<Readers, DropReaders> readers_;
};

}  // namespace df::cuda
