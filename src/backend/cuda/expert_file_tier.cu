// The expert cache's file tier (expert_cache.h): acquire() brings the experts a call routes
// to into slots, reading the missed ones from the model file on a pool of reader threads.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_cache.h"
#include "backend/cuda/matvec/layout.cuh"
#include "backend/range_reader.h"

namespace df::cuda {
namespace {

struct TableWrite {
  const uint8_t** at;
  const uint8_t* value;
};

// *w[i].at = w[i].value: a placement change of the file tier (on the copy stream).
__global__ void table_write_kernel(const TableWrite* w, int n) {
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += static_cast<int>(gridDim.x * blockDim.x))
    *w[i].at = w[i].value;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// 0.75^d (the score's decay over d rounds); 0 past 64 rounds.
float decay(int64_t d) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65);
    t[0] = 1.0f;
    for (size_t i = 1; i < t.size(); ++i) t[i] = t[i - 1] * 0.75f;
    return t;
  }();
  return d < 0 ? 1.0f : d < 65 ? table[static_cast<size_t>(d)] : 0.0f;
}

}  // namespace

// kReaders threads; run(n, fn) calls fn(i, worker) for every i < n on them and returns when
// all are done, rethrowing the first error. Each worker has an aligned read buffer.
struct ExpertCache::Readers {
  explicit Readers(int n) : raw(static_cast<size_t>(n), nullptr), raw_bytes(static_cast<size_t>(n), 0) {
    for (int w = 0; w < n; ++w) threads.emplace_back([this, w] { loop(w); });
  }
  ~Readers() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    for (uint8_t* p : raw) std::free(p);
  }
  void run(size_t count, const std::function<void(size_t, int)>& fn) {
    if (count == 0) return;
    std::unique_lock<std::mutex> lk(mu);
    job = &fn, n = count, next = 0, finished = 0, error = nullptr;
    cv.notify_all();
    done_cv.wait(lk, [&] { return finished == n; });
    job = nullptr;
    if (error) std::rethrow_exception(error);
  }
  // Worker w's buffer of at least `bytes` (RangeReader::kAlign aligned).
  uint8_t* buffer(int w, size_t bytes) {
    const size_t i = static_cast<size_t>(w);
    if (raw_bytes[i] < bytes) {
      std::free(raw[i]);
      const size_t b = (bytes + RangeReader::kAlign - 1) / RangeReader::kAlign * RangeReader::kAlign;
      raw[i] = static_cast<uint8_t*>(std::aligned_alloc(RangeReader::kAlign, b));
      if (!raw[i]) throw Error("cuda expert cache: out of host memory for a read buffer of " + std::to_string(b) + " bytes");
      raw_bytes[i] = b;
    }
    return raw[i];
  }

 private:
  void loop(int w) {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || (job && next < n); });
      if (stop) return;
      const size_t i = next++;
      const auto* fn = job;
      lk.unlock();
      try {
        (*fn)(i, w);
      } catch (...) {
        lk.lock();
        if (!error) error = std::current_exception();
        lk.unlock();
      }
      lk.lock();
      if (++finished == n) done_cv.notify_all();
    }
  }
  std::vector<std::thread> threads;
  std::mutex mu;
  std::condition_variable cv, done_cv;
  const std::function<void(size_t, int)>* job = nullptr;
  size_t n = 0, next = 0, finished = 0;
  bool stop = false;
  std::exception_ptr error;
  std::vector<uint8_t*> raw;
  std::vector<size_t> raw_bytes;
};

void ExpertCache::DropReaders::operator()(Readers* r) const { delete r; }

void ExpertCache::start_readers() {
  if (readers_) return;
  ctx_.make_current();
  readers_.reset(new Readers(kReaders));
  void* p = nullptr;
  cuda_check(cudaHostAlloc(&p, 2 * kWave * slot_bytes_, cudaHostAllocDefault), "cudaHostAlloc(expert staging)");
  stage_ = static_cast<uint8_t*>(p);
  for (cudaEvent_t& e : stage_done_) cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventCreateWithFlags(&upd_done_, cudaEventDisableTiming), "cudaEventCreate");
  cuda_check(cudaEventCreateWithFlags(&loaded_, cudaEventDisableTiming), "cudaEventCreate");
}

// Reads and repacks loads[first, first + count) into staging set `set`, then queues their
// uploads on the copy stream (which already waits for the compute stream's earlier kernels).
void ExpertCache::load_wave(const std::vector<Load>& loads, size_t first, size_t count, int set) {
  if (stage_pending_[set]) {  // that set's previous uploads must have left the staging
    cuda_check(cudaEventSynchronize(stage_done_[set]), "expert upload");
    stage_pending_[set] = false;
  }
  uint8_t* stage = stage_ + static_cast<size_t>(set) * kWave * slot_bytes_;
  const double t0 = now_seconds();
  readers_->run(count, [&](size_t i, int w) {
    const Load& L = loads[first + i];
    const ExpertStack& s = *stacks_[static_cast<size_t>(L.stack)];
    const uint8_t* raw = nullptr;
    if (s.file) {
      try {
        raw = s.file->read(s.file_offset + s.src_bytes * static_cast<uint64_t>(L.expert), s.src_bytes,
                           readers_->buffer(w, RangeReader::staging_bytes(s.src_bytes)));
      } catch (const Error& e) {
        throw Error("cuda expert cache: reading expert " + std::to_string(L.expert) + " of a " +
                    std::string(type_name(s.type)) + " stack from the model file: " + e.what());
      }
    } else {
      raw = s.src + s.src_bytes * static_cast<size_t>(L.expert);
    }
    cudamv::pack_rows(s.type, s.cols, s.rows, raw, cudamv::layout_of(s.type, s.cols), stage + i * slot_bytes_);
  });
  st_.read_seconds += now_seconds() - t0;
  for (size_t i = 0; i < count; ++i) {
    const Load& L = loads[first + i];
    const ExpertStack& s = *stacks_[static_cast<size_t>(L.stack)];
    cuda_check(cudaMemcpyAsync(dev_ + slot_bytes_ * static_cast<size_t>(L.slot), stage + i * slot_bytes_, s.expert_bytes,
                               cudaMemcpyHostToDevice, copy_),
               "expert upload");
    (s.file ? st_.bytes_from_disk : st_.bytes_from_memory) += s.src_bytes;
    st_.bytes_uploaded += s.expert_bytes;
  }
  cuda_check(cudaEventRecord(stage_done_[set], copy_), "cudaEventRecord");
  stage_pending_[set] = true;
}

bool ExpertCache::acquire(const ExpertStack* const* stacks, int n_stacks, const int32_t* ids, int64_t n, bool lookup,
                          uint64_t routing) {
  if (!from_file_) return true;
  ensure_ready();
  const double t0 = now_seconds();
  ++serial_;
  if (seen_.size() < static_cast<size_t>(n_counts_)) seen_.resize(static_cast<size_t>(n_counts_), 0);
  // The distinct experts the call needs, stack by stack.
  std::vector<std::pair<int, int64_t>> need;
  for (int k = 0; k < n_stacks; ++k) {
    const ExpertStack& s = *stacks[k];
    for (int64_t i = 0; i < n; ++i) {
      const int64_t e = ids[i];
      if (e < 0) continue;
      if (e >= s.n_expert) throw Error("cuda expert cache: expert id " + std::to_string(e) + " out of range");
      uint64_t& seen = seen_[static_cast<size_t>(s.count0 + e)];
      if (seen == serial_) continue;
      seen = serial_;
      need.emplace_back(s.id, e);
    }
  }
  if (need.size() > slots_.size()) {
    if (!lookup) return false;
    throw Error("cuda expert cache: one expert product routes to " + std::to_string(need.size()) + " experts (" +
                gib(need.size() * slot_bytes_) + ") but the cache holds " + std::to_string(slots_.size()) + " (" +
                gib(slots_.size() * slot_bytes_) + "): the file tier needs every expert of a call on the device; "
                "raise --expert-cache-mb to at least " +
                std::to_string((need.size() * slot_bytes_ + (1u << 20) - 1) >> 20));
  }
  // Hits pin their slots; misses are loaded below. A stack counts a routing's lookups once
  // (matmul_id_swiglu's fallback runs matmul_id on each stack again).
  std::vector<Load> loads;
  for (const auto& [k, e] : need) {
    ExpertStack& s = *stacks_[static_cast<size_t>(k)];
    const size_t g = static_cast<size_t>(s.count0 + e);
    const bool count = lookup && (routing == 0 || s.counted_routing != routing);
    const int slot = slot_of_[static_cast<size_t>(k)][static_cast<size_t>(e)];
    if (count) {
      score_[g] = score_[g] * decay(s.round - last_round_[g]) + 1.0f;
      last_round_[g] = s.round;
      if (slot >= 0 && !fresh_[g]) ++host_hits_;
      else ++host_misses_;
      fresh_[g] = 0;
    }
    if (slot >= 0) {
      pin_[static_cast<size_t>(slot)] = serial_;
    } else {
      loads.push_back(Load{k, e, -1});
      fresh_[g] = lookup ? 0 : 1;
    }
  }
  for (int k = 0; k < n_stacks && lookup; ++k) {
    ExpertStack& s = *stacks_[static_cast<size_t>(stacks[k]->id)];
    if (routing == 0 || s.counted_routing != routing) ++s.round;
    s.counted_routing = routing;
  }
  ++st_.acquires;
  if (loads.empty()) {
    st_.stall_seconds += now_seconds() - t0;
    return true;
  }
  // Victims: empty slots, then the unpinned ones of lowest score (older first on ties).
  start_readers();
  std::vector<int> victims;
  for (size_t i = 0; i < slots_.size() && victims.size() < loads.size(); ++i)
    if (slots_[i].stack < 0) victims.push_back(static_cast<int>(i));
  if (victims.size() < loads.size()) {
    struct Cand {
      float score;
      int64_t last;
      int slot;
    };
    std::vector<Cand> cand;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const Slot& sl = slots_[i];
      if (sl.stack < 0 || pin_[i] == serial_) continue;
      const ExpertStack& s = *stacks_[static_cast<size_t>(sl.stack)];
      const size_t g = static_cast<size_t>(s.count0 + sl.expert);
      cand.push_back(Cand{score_[g] * decay(s.round - last_round_[g]), last_round_[g], static_cast<int>(i)});
    }
    const size_t want = loads.size() - victims.size();
    auto lower = [](const Cand& a, const Cand& b) { return a.score != b.score ? a.score < b.score : a.last < b.last; };
    std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(want - 1), cand.end(), lower);
    for (size_t i = 0; i < want; ++i) victims.push_back(cand[i].slot);
  }
  // Table writes: the victims' entries cleared, then the loaded experts' entries set.
  std::vector<TableWrite> writes;
  for (size_t i = 0; i < loads.size(); ++i) {
    Slot& sl = slots_[static_cast<size_t>(victims[i])];
    if (sl.stack >= 0) {
      const ExpertStack& old = *stacks_[static_cast<size_t>(sl.stack)];
      writes.push_back(TableWrite{old.table + sl.expert, nullptr});
      writes.push_back(TableWrite{old.table + old.n_expert + sl.expert, nullptr});
      slot_of_[static_cast<size_t>(sl.stack)][static_cast<size_t>(sl.expert)] = -1;
      fresh_[static_cast<size_t>(old.count0 + sl.expert)] = 0;
      sl.stack = -1, sl.expert = -1;
    }
    loads[i].slot = victims[i];
  }
  // The copy stream starts once the compute stream's queued kernels (readers of the victims) are done.
  cuda_check(cudaEventRecord(evicted_, ctx_.stream()), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(copy_, evicted_, 0), "cudaStreamWaitEvent");
  for (size_t first = 0, w = 0; first < loads.size(); first += kWave, ++w)
    load_wave(loads, first, std::min<size_t>(kWave, loads.size() - first), static_cast<int>(w % 2));
  for (const Load& L : loads) {
    const ExpertStack& s = *stacks_[static_cast<size_t>(L.stack)];
    uint8_t* q = dev_ + slot_bytes_ * static_cast<size_t>(L.slot);
    writes.push_back(TableWrite{s.table + L.expert, q});
    writes.push_back(TableWrite{s.table + s.n_expert + L.expert, q + s.q_row_bytes * static_cast<size_t>(s.rows)});
    Slot& sl = slots_[static_cast<size_t>(L.slot)];
    sl.stack = L.stack, sl.expert = L.expert, sl.landed = true;  // stream-ordered before any reader
    slot_of_[static_cast<size_t>(L.stack)][static_cast<size_t>(L.expert)] = L.slot;
    pin_[static_cast<size_t>(L.slot)] = serial_;
  }
  if (upd_pending_) {  // the previous table writes have left the pinned list
    cuda_check(cudaEventSynchronize(upd_done_), "expert table writes");
    upd_pending_ = false;
  }
  if (writes.size() > upd_cap_) {
    if (upd_host_) cuda_check(cudaFreeHost(upd_host_), "cudaFreeHost");
    if (upd_dev_) cuda_check(cudaFree(upd_dev_), "cudaFree");
    upd_host_ = nullptr, upd_dev_ = nullptr, upd_cap_ = 0;
    const size_t cap = std::max<size_t>(writes.size(), 4 * static_cast<size_t>(kWave));
    cuda_check(cudaHostAlloc(&upd_host_, cap * sizeof(TableWrite), cudaHostAllocDefault),
               "cudaHostAlloc(expert table writes)");
    cuda_check(cudaMalloc(&upd_dev_, cap * sizeof(TableWrite)), "cudaMalloc(expert table writes)");
    upd_cap_ = cap;
  }
  std::copy(writes.begin(), writes.end(), static_cast<TableWrite*>(upd_host_));
  cuda_check(cudaMemcpyAsync(upd_dev_, upd_host_, writes.size() * sizeof(TableWrite), cudaMemcpyHostToDevice, copy_),
             "upload of expert table writes");
  const int nw = static_cast<int>(writes.size());
  table_write_kernel<<<(nw + 255) / 256, 256, 0, copy_>>>(static_cast<const TableWrite*>(upd_dev_), nw);
  launch_check("expert table writes");
  cuda_check(cudaEventRecord(upd_done_, copy_), "cudaEventRecord");
  upd_pending_ = true;
  cuda_check(cudaEventRecord(loaded_, copy_), "cudaEventRecord");
  cuda_check(cudaStreamWaitEvent(ctx_.stream(), loaded_, 0), "cudaStreamWaitEvent");
  st_.loads += loads.size();
  st_.replacements += loads.size();
  ++st_.syncs;
  st_.stall_seconds += now_seconds() - t0;
  return true;
}

}  // namespace df::cuda
