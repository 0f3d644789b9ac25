#include "backend/cuda/expert_cache.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/matvec/layout.cuh"

namespace df::cuda {

ExpertCache::ExpertCache(const CudaContext& ctx, uint64_t capacity_bytes, uint64_t margin)
    : ctx_(ctx), want_bytes_(capacity_bytes), margin_(margin) {
  ctx_.make_current();
  cuda_check(cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking), "cudaStreamCreate(expert copies)");
}

ExpertCache::~ExpertCache() {
  cudaSetDevice(ctx_.device());
  cudaStreamSynchronize(copy_);
  cudaStreamSynchronize(ctx_.stream());
  for (Slot& s : slots_) {
    cudaEventDestroy(s.ready);
    cudaEventDestroy(s.free);
  }
  if (dev_) cudaFree(dev_);
  for (auto& s : stacks_) cudaFreeHost(s->host);
  cudaStreamDestroy(copy_);
}

const ExpertStack* ExpertCache::add_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert,
                                          const void* host_blocks) {
  const cudamv::Layout l = cudamv::layout_of(type, cols);
  if (dev_ && (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows) > slot_bytes_)
    throw Error("cuda expert cache: a stack of larger experts than its slots was added after the cache was first used");
  auto s = std::make_unique<ExpertStack>();
  s->type = type, s->cols = cols, s->rows = rows, s->n_expert = n_expert;
  s->q_row_bytes = l.q_row_bytes, s->m_row_bytes = l.m_row_bytes;
  s->expert_bytes = (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows);
  s->id = static_cast<int>(stacks_.size());
  const size_t total = s->expert_bytes * static_cast<size_t>(n_expert);
  ctx_.make_current();
  void* p = nullptr;
  if (cudaHostAlloc(&p, total, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    throw Error("cuda expert cache: cannot pin " + std::to_string(total) + " bytes (" + gib(total) +
                ") of host memory for the experts");
  }
  s->host = static_cast<uint8_t*>(p);
  const size_t src_expert = row_bytes(type, cols) * static_cast<size_t>(rows);
  const auto* src = static_cast<const uint8_t*>(host_blocks);
  for (int64_t e = 0; e < n_expert; ++e)
    cudamv::pack_rows(type, cols, rows, src + src_expert * static_cast<size_t>(e), l,
                      s->host + s->expert_bytes * static_cast<size_t>(e));
  st_.host_bytes += total;
  ++st_.stacks;
  slot_bytes_ = std::max(slot_bytes_, (s->expert_bytes + 255) / 256 * 256);
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
  }
  uint64_t all = 0;
  for (const auto& s : stacks_) all += static_cast<uint64_t>(s->n_expert);
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
  for (int i = 0; i < n; ++i) {
    Slot& s = slots_[static_cast<size_t>(i)];
    cuda_check(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreate");
    cuda_check(cudaEventCreateWithFlags(&s.free, cudaEventDisableTiming), "cudaEventCreate");
    lru_.push_back(i);
    s.lru = std::prev(lru_.end());
  }
  st_.capacity_bytes = slot_bytes_ * static_cast<uint64_t>(n);
  st_.slots = n;
}

int64_t ExpertCache::slots() {
  if (!dev_) allocate();
  return static_cast<int64_t>(slots_.size());
}

uint8_t* ExpertCache::acquire(const ExpertStack& s, int64_t e, int* slot) {
  if (!dev_) allocate();
  const uint64_t key = static_cast<uint64_t>(s.id) << 32 | static_cast<uint64_t>(e);
  int v = -1;
  const auto it = where_.find(key);
  if (it != where_.end()) {
    v = it->second;
    ++st_.hits;
  } else {
    for (auto r = lru_.rbegin(); r != lru_.rend(); ++r)
      if (!slots_[static_cast<size_t>(*r)].held) {
        v = *r;
        break;
      }
    if (v < 0) throw Error("cuda expert cache: more experts held at once than the cache has slots");
    Slot& sl = slots_[static_cast<size_t>(v)];
    if (sl.key != ~0ull) where_.erase(sl.key);
    // Overwrite only after the kernels that read the slot's previous expert are done.
    if (sl.used_free) cuda_check(cudaStreamWaitEvent(copy_, sl.free, 0), "cudaStreamWaitEvent");
    cuda_check(cudaMemcpyAsync(dev_ + slot_bytes_ * static_cast<size_t>(v),
                               s.host + s.expert_bytes * static_cast<size_t>(e), s.expert_bytes,
                               cudaMemcpyHostToDevice, copy_),
               "expert upload");
    cuda_check(cudaEventRecord(sl.ready, copy_), "cudaEventRecord");
    sl.key = key;
    where_[key] = v;
    ++st_.misses;
    st_.bytes_uploaded += s.expert_bytes;
  }
  Slot& sl = slots_[static_cast<size_t>(v)];
  lru_.splice(lru_.begin(), lru_, sl.lru);
  if (!sl.held) {
    sl.held = true;
    held_.push_back(v);
  }
  *slot = v;
  return dev_ + slot_bytes_ * static_cast<size_t>(v);
}

void ExpertCache::wait_ready(int slot, cudaStream_t compute) {
  cuda_check(cudaStreamWaitEvent(compute, slots_[static_cast<size_t>(slot)].ready, 0), "cudaStreamWaitEvent");
}

void ExpertCache::release_all(cudaStream_t compute) {
  for (int v : held_) {
    Slot& sl = slots_[static_cast<size_t>(v)];
    cuda_check(cudaEventRecord(sl.free, compute), "cudaEventRecord");
    sl.used_free = true;
    sl.held = false;
  }
  held_.clear();
}

ExpertCacheStats ExpertCache::stats() const { return st_; }

void ExpertCache::reset_stats() {
  st_.hits = st_.misses = st_.bytes_uploaded = 0;
}

}  // namespace df::cuda
