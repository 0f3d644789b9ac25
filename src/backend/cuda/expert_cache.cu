#include "backend/cuda/expert_cache.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matvec/layout.cuh"
#include "backend/range_reader.h"

namespace df::cuda {
namespace {

// table[e] = q, table[n_expert + e] = m (a placement change, stream-ordered).
__global__ void set_planes_kernel(const uint8_t** table, int64_t n_expert, int64_t e, const uint8_t* q,
                                  const uint8_t* m) {
  table[e] = q;
  table[n_expert + e] = m;
}

// Per slot: uses[e] += 1; a lookup whose quant plane lies in the slots [lo, hi) is a hit,
// any other one reads expert_bytes from host memory.
__global__ void count_kernel(const int32_t* ids, int64_t n_slots, const uint8_t* const* table, int64_t n_expert,
                             uint32_t* uses, unsigned long long* stats, const uint8_t* lo, const uint8_t* hi,
                             unsigned long long expert_bytes) {
  for (int64_t s = threadIdx.x; s < n_slots; s += blockDim.x) {
    int e = ids[s];
    if (e < 0) continue;  // an unused chunk of a grouped launch
    e = e < n_expert ? e : static_cast<int>(n_expert - 1);
    atomicAdd(uses + e, 1u);
    const uint8_t* q = table[e];
    const bool hit = q >= lo && q < hi;
    atomicAdd(stats + (hit ? 0 : 1), 1ull);
    if (!hit) atomicAdd(stats + 2, expert_bytes);
  }
}

}  // namespace

ExpertCache::ExpertCache(const CudaContext& ctx, uint64_t capacity_bytes, uint64_t margin, uint64_t budget,
                         uint64_t free_at_start, bool from_file)
    : ctx_(ctx), from_file_(from_file), want_bytes_(capacity_bytes), margin_(margin), budget_(budget),
      free_at_start_(free_at_start) {
  st_.from_file = from_file;
  ctx_.make_current();
  cuda_check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate(expert copies)");
  cuda_check(cudaEventCreateWithFlags(&evicted_, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventCreateWithFlags(&counts_ready_, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&dev_stats_), 3 * sizeof(unsigned long long)), "cudaMalloc(cache stats)");
  cuda_check(cudaMemset(dev_stats_, 0, 3 * sizeof(unsigned long long)), "cudaMemset(cache stats)");
}

ExpertCache::~ExpertCache() {
  cudaSetDevice(ctx_.device());
  cudaStreamSynchronize(copy_);
  cudaStreamSynchronize(ctx_.stream());
  readers_.reset();
  for (Slot& s : slots_) cudaEventDestroy(s.ready);
  for (cudaEvent_t e : stage_done_)
    if (e) cudaEventDestroy(e);
  if (upd_done_) cudaEventDestroy(upd_done_);
  if (loaded_) cudaEventDestroy(loaded_);
  if (stage_) cudaFreeHost(stage_);
  if (upd_host_) cudaFreeHost(upd_host_);
  if (upd_dev_) cudaFree(upd_dev_);
  cudaEventDestroy(evicted_);
  cudaEventDestroy(counts_ready_);
  if (dev_) cudaFree(dev_);
  cudaFree(dev_stats_);
  for (auto& s : stacks_) {
    if (s->host) cudaFreeHost(s->host);
    cudaFreeHost(s->uses_host);
    cudaFree(s->table);
    cudaFree(s->uses);
  }
  cudaStreamDestroy(copy_);
}

const ExpertStack* ExpertCache::add_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert,
                                          const void* host_blocks, const RangeReader* file, uint64_t file_offset) {
  const cudamv::Layout l = cudamv::layout_of(type, cols);
  if (dev_ && (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows) > slot_bytes_)
    throw Error("cuda expert cache: a stack of larger experts than its slots was added after the cache was first used");
  auto s = std::make_unique<ExpertStack>();
  s->type = type, s->cols = cols, s->rows = rows, s->n_expert = n_expert;
  s->q_row_bytes = l.q_row_bytes, s->m_row_bytes = l.m_row_bytes;
  s->expert_bytes = (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows);
  s->id = static_cast<int>(stacks_.size());
  s->count0 = n_counts_;
  const size_t total = s->expert_bytes * static_cast<size_t>(n_expert);
  s->src_bytes = row_bytes(type, cols) * static_cast<size_t>(rows);
  ctx_.make_current();
  std::vector<const uint8_t*> t(static_cast<size_t>(2 * n_expert), nullptr);
  if (from_file_) {  // nothing read now: every expert starts nowhere (null table entries)
    s->file = file, s->file_offset = file_offset;
    s->src = file ? nullptr : static_cast<const uint8_t*>(host_blocks);
    s->host_dev = dev_;
    st_.expert_bytes += total;
  } else {
    void* p = nullptr;
    if (cudaHostAlloc(&p, total, cudaHostAllocMapped) != cudaSuccess) {
      cudaGetLastError();
      throw Error("cuda expert cache: cannot pin " + std::to_string(total) + " bytes (" + gib(total) +
                  ") of host memory for the experts");
    }
    s->host = static_cast<uint8_t*>(p);
    void* d = nullptr;
    cuda_check(cudaHostGetDevicePointer(&d, p, 0), "cudaHostGetDevicePointer(experts)");
    s->host_dev = static_cast<uint8_t*>(d);
    const size_t src_expert = row_bytes(type, cols) * static_cast<size_t>(rows);
    const auto* src = static_cast<const uint8_t*>(host_blocks);
    {  // on up to 16 host threads over the experts (loading is otherwise bound by one core)
      const int threads = static_cast<int>(
          std::min<int64_t>(n_expert, std::min(16u, std::max(1u, std::thread::hardware_concurrency()))));
      std::vector<std::thread> pool;
      for (int i = 0; i < threads; ++i)
        pool.emplace_back([&, i] {
          for (int64_t e = i; e < n_expert; e += threads)
            cudamv::pack_rows(type, cols, rows, src + src_expert * static_cast<size_t>(e), l,
                              s->host + s->expert_bytes * static_cast<size_t>(e));
        });
      for (auto& th : pool) th.join();
    }
    // Every expert starts in host memory.
    for (int64_t e = 0; e < n_expert; ++e) {
      const uint8_t* q = s->host_dev + s->expert_bytes * static_cast<size_t>(e);
      t[static_cast<size_t>(e)] = q;
      t[static_cast<size_t>(n_expert + e)] = q + s->q_row_bytes * static_cast<size_t>(rows);
    }
    st_.host_bytes += total;
  }
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&s->table), t.size() * sizeof(void*)), "cudaMalloc(expert table)");
  cuda_check(cudaMemcpy(s->table, t.data(), t.size() * sizeof(void*), cudaMemcpyHostToDevice), "upload of an expert table");
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&s->uses), static_cast<size_t>(n_expert) * sizeof(uint32_t)),
             "cudaMalloc(expert counts)");
  cuda_check(cudaMemset(s->uses, 0, static_cast<size_t>(n_expert) * sizeof(uint32_t)), "cudaMemset(expert counts)");
  cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&s->uses_host), static_cast<size_t>(n_expert) * sizeof(uint32_t),
                           cudaHostAllocDefault),
             "cudaHostAlloc(expert counts)");
  std::fill(s->uses_host, s->uses_host + n_expert, 0u);
  n_counts_ += n_expert;
  last_counts_.resize(static_cast<size_t>(n_counts_), 0);
  score_.resize(static_cast<size_t>(n_counts_), 0.0f);
  last_round_.resize(static_cast<size_t>(n_counts_), 0);
  fresh_.resize(static_cast<size_t>(n_counts_), 0);
  ++st_.stacks;
  slot_bytes_ = std::max(slot_bytes_, (s->expert_bytes + 255) / 256 * 256);
  slot_of_.emplace_back(static_cast<size_t>(n_expert), -1);
  const ExpertStack* key = s.get();
  by_key_.emplace(key, key);
  stacks_.push_back(std::move(s));
  return key;
}

const ExpertStack* ExpertCache::find(const void* key) const {
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

void ExpertCache::allocate() {
  if (slot_bytes_ == 0) throw Error("cuda expert cache: no experts were registered");
  ctx_.make_current();
  uint64_t bytes = want_bytes_;
  if (bytes == 0) {
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    bytes = free_b > margin_ ? free_b - margin_ : 0;
    if (budget_ > 0) {  // --gpu-mem: what the dense part, caches and state left of the budget
      const uint64_t used = free_at_start_ > free_b ? free_at_start_ - free_b : 0;
      const uint64_t left = budget_ > used + margin_ ? budget_ - used - margin_ : 0;
      bytes = std::min<uint64_t>(left, free_b > (256ull << 20) ? free_b - (256ull << 20) : 0);
    }
  }
  const uint64_t all = static_cast<uint64_t>(n_counts_);
  const int64_t n = static_cast<int64_t>(std::min<uint64_t>(bytes / slot_bytes_, all));
  if (n < 1)
    throw Error("cuda expert cache: " + std::to_string(bytes) + " bytes hold no expert of " +
                std::to_string(slot_bytes_) + " bytes (raise --expert-cache-mb)");
  void* p = nullptr;
  if (cudaMalloc(&p, slot_bytes_ * static_cast<size_t>(n)) != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuda expert cache: out of device memory allocating " + gib(slot_bytes_ * static_cast<size_t>(n)));
  }
  dev_ = static_cast<uint8_t*>(p);
  slots_.resize(static_cast<size_t>(n));
  for (Slot& s : slots_) cuda_check(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreate");
  st_.capacity_bytes = slot_bytes_ * static_cast<uint64_t>(n);
  st_.slots = n;
  if (from_file_) {
    for (auto& s : stacks_) s->host_dev = dev_;
    pin_.assign(static_cast<size_t>(n), 0);
  }
}

void ExpertCache::ensure_ready() {
  if (dev_) return;
  allocate();
  if (from_file_) return;  // filled on demand
  // First placement: experts 0, 1, ... of every stack in turn.
  int slot = 0;
  const int n = static_cast<int>(slots_.size());
  for (int64_t e = 0; slot < n; ++e)
    for (size_t k = 0; k < stacks_.size() && slot < n; ++k)
      if (e < stacks_[k]->n_expert) place(slot++, static_cast<int>(k), e);
}

void ExpertCache::place(int slot, int stack, int64_t e) {
  Slot& sl = slots_[static_cast<size_t>(slot)];
  const ExpertStack& s = *stacks_[static_cast<size_t>(stack)];
  uint8_t* dst = dev_ + slot_bytes_ * static_cast<size_t>(slot);
  cuda_check(cudaMemcpyAsync(dst, s.host + s.expert_bytes * static_cast<size_t>(e), s.expert_bytes,
                             cudaMemcpyHostToDevice, copy_),
             "expert upload");
  set_planes_kernel<<<1, 1, 0, copy_>>>(s.table, s.n_expert, e, dst, dst + s.q_row_bytes * static_cast<size_t>(s.rows));
  launch_check("expert table write");
  cuda_check(cudaEventRecord(sl.ready, copy_), "cudaEventRecord");
  sl.stack = stack, sl.expert = e, sl.landed = false;
  slot_of_[static_cast<size_t>(stack)][static_cast<size_t>(e)] = slot;
  st_.bytes_uploaded += s.expert_bytes;
  ++st_.replacements;
}

void ExpertCache::refresh_landed() {
  for (Slot& s : slots_)
    if (!s.landed) {
      const cudaError_t r = cudaEventQuery(s.ready);
      if (r == cudaSuccess) s.landed = true;
      else if (r != cudaErrorNotReady) cuda_check(r, "expert upload");
    }
}

const uint8_t* ExpertCache::planes(const ExpertStack& s, int64_t e, bool* resident) const {
  const int slot = slot_of_[static_cast<size_t>(s.id)][static_cast<size_t>(e)];
  if (from_file_ && slot < 0) throw Error("cuda expert cache: an expert not brought into the cache (file tier) was read");
  *resident = slot >= 0 && slots_[static_cast<size_t>(slot)].landed;
  return *resident ? dev_ + slot_bytes_ * static_cast<size_t>(slot) : s.host_dev + s.expert_bytes * static_cast<size_t>(e);
}

void ExpertCache::count(const ExpertStack& s, const int32_t* ids, int64_t n_slots, cudaStream_t compute) {
  if (from_file_) return;  // acquire() counts
  count_kernel<<<1, 128, 0, compute>>>(ids, n_slots, s.table, s.n_expert, s.uses, dev_stats_, dev_,
                                       dev_ + slot_bytes_ * slots_.size(), s.expert_bytes);
  launch_check("expert counts");
}

void ExpertCache::count_host(const ExpertStack& s, bool resident) {
  if (from_file_) return;  // acquire() counts
  if (resident) {
    ++host_hits_;
  } else {
    ++host_misses_;
    host_bytes_in_place_ += s.expert_bytes;
  }
}

void ExpertCache::maintain() {
  if (from_file_ || !dev_ || ++calls_ % kReplaceEvery != 0) return;
  refresh_landed();
  if (!counts_pending_) {
    for (const auto& s : stacks_)
      cuda_check(cudaMemcpyAsync(s->uses_host, s->uses, static_cast<size_t>(s->n_expert) * sizeof(uint32_t),
                                 cudaMemcpyDeviceToHost, ctx_.stream()),
                 "download of the expert counts");
    cuda_check(cudaEventRecord(counts_ready_, ctx_.stream()), "cudaEventRecord");
    counts_pending_ = true;
    return;
  }
  const cudaError_t r = cudaEventQuery(counts_ready_);
  if (r == cudaErrorNotReady) return;
  cuda_check(r, "download of the expert counts");
  counts_pending_ = false;
  process_counts();
}

void ExpertCache::process_counts() {
  for (const auto& s : stacks_)
    for (int64_t e = 0; e < s->n_expert; ++e) {
      const size_t i = static_cast<size_t>(s->count0 + e);
      const uint32_t d = s->uses_host[e] - last_counts_[i];
      last_counts_[i] = s->uses_host[e];
      score_[i] = 0.75f * score_[i] + static_cast<float>(d);
    }
  for (const Slot& s : slots_)
    if (!s.landed) return;  // one round of replacements in flight at a time
  const int64_t max_swaps = std::max<int64_t>(1, static_cast<int64_t>(slots_.size()) / kMaxSwapShare);
  // Candidates: non-resident experts by decreasing score; victims: slots by increasing score.
  auto score_of = [&](int stack, int64_t e) {
    return score_[static_cast<size_t>(stacks_[static_cast<size_t>(stack)]->count0 + e)];
  };
  std::vector<std::pair<float, int64_t>> cand;  // (score, global index)
  for (size_t k = 0; k < stacks_.size(); ++k)
    for (int64_t e = 0; e < stacks_[k]->n_expert; ++e)
      if (slot_of_[k][static_cast<size_t>(e)] < 0 && score_of(static_cast<int>(k), e) > 2.0f)
        cand.emplace_back(score_of(static_cast<int>(k), e), stacks_[k]->count0 + e);
  if (cand.empty()) return;
  const size_t nc = std::min<size_t>(cand.size(), static_cast<size_t>(max_swaps));
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(nc), cand.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::pair<float, int>> vict;  // (score, slot)
  for (size_t i = 0; i < slots_.size(); ++i)
    vict.emplace_back(score_of(slots_[i].stack, slots_[i].expert), static_cast<int>(i));
  const size_t nv = std::min(vict.size(), nc);
  std::partial_sort(vict.begin(), vict.begin() + static_cast<std::ptrdiff_t>(nv), vict.end());
  std::vector<std::pair<int, int64_t>> in;  // (slot, global index of the new expert)
  for (size_t i = 0; i < nv; ++i) {
    if (!(cand[i].first > 2.0f * vict[i].first + 2.0f)) break;
    in.emplace_back(vict[i].second, cand[i].second);
  }
  if (in.empty()) return;
  // Victims point back to host memory (compute stream), then the copies overwrite their slots.
  for (const auto& [slot, g] : in) {
    Slot& sl = slots_[static_cast<size_t>(slot)];
    const ExpertStack& s = *stacks_[static_cast<size_t>(sl.stack)];
    const uint8_t* q = s.host_dev + s.expert_bytes * static_cast<size_t>(sl.expert);
    set_planes_kernel<<<1, 1, 0, ctx_.stream()>>>(s.table, s.n_expert, sl.expert, q,
                                                  q + s.q_row_bytes * static_cast<size_t>(s.rows));
    launch_check("expert table write");
    slot_of_[static_cast<size_t>(sl.stack)][static_cast<size_t>(sl.expert)] = -1;
    sl.stack = -1, sl.expert = -1;
  }
  cuda_check(cudaEventRecord(evicted_, ctx_.stream()), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(copy_, evicted_, 0), "cudaStreamWaitEvent");
  for (const auto& [slot, g] : in) {
    int k = 0;
    while (k + 1 < static_cast<int>(stacks_.size()) && stacks_[static_cast<size_t>(k + 1)]->count0 <= g) ++k;
    place(slot, k, g - stacks_[static_cast<size_t>(k)]->count0);
  }
}

ExpertCacheStats ExpertCache::stats() {
  ExpertCacheStats s = st_;
  s.hits += host_hits_, s.misses += host_misses_, s.bytes_in_place += host_bytes_in_place_;
  bool any = false, all_direct = true;
  for (const auto& k : stacks_)
    if (k->file) any = true, all_direct = all_direct && k->file->direct();
  s.direct = any && all_direct;
  if (dev_stats_ && !from_file_) {
    ctx_.make_current();
    unsigned long long d[3] = {0, 0, 0};
    cuda_check(cudaMemcpyAsync(d, dev_stats_, sizeof d, cudaMemcpyDeviceToHost, ctx_.stream()), "download of the cache stats");
    cuda_check(cudaStreamSynchronize(ctx_.stream()), "download of the cache stats");
    s.hits += d[0], s.misses += d[1], s.bytes_in_place += d[2];
  }
  return s;
}

void ExpertCache::reset_stats() {
  st_.bytes_uploaded = st_.replacements = 0;
  st_.loads = st_.bytes_from_disk = st_.bytes_from_memory = st_.acquires = st_.syncs = 0;
  st_.read_seconds = st_.stall_seconds = 0;
  host_hits_ = host_misses_ = host_bytes_in_place_ = 0;
  if (dev_stats_) {
    ctx_.make_current();
    cuda_check(cudaMemsetAsync(dev_stats_, 0, 3 * sizeof(unsigned long long), ctx_.stream()), "cudaMemset(cache stats)");
  }
}

}  // namespace df::cuda
