#include "backend/cuda/op_profile.h"

#include <algorithm>
#include <atomic>

#include "backend/cuda/cuda_check.h"

namespace df::cuda {
namespace {

// Holds the stream until flag[0] is set by the host or `timeout_ns` pass (then flag[1] = 1).
__global__ void gate_kernel(volatile int32_t* flag, uint64_t timeout_ns) {
  uint64_t t0 = 0, t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (flag[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) {
      flag[1] = 1;
      break;
    }
    __nanosleep(1000);
  }
}

constexpr uint64_t kGateTimeoutNs = 50'000'000;  // 50 ms (a 27B step fills the launch queue: then every step waits this long)

}  // namespace

OpProfiler::OpProfiler(cudaStream_t s) : stream_(s) {
  void* h = nullptr;
  cuda_check(cudaHostAlloc(&h, 2 * sizeof(int32_t), cudaHostAllocMapped), "cudaHostAlloc(profile gate)");
  flag_ = static_cast<volatile int32_t*>(h);
  flag_[0] = 0;
  flag_[1] = 0;
  void* d = nullptr;
  cuda_check(cudaHostGetDevicePointer(&d, h, 0), "cudaHostGetDevicePointer(profile gate)");
  flag_dev_ = static_cast<int32_t*>(d);
}

OpProfiler::~OpProfiler() {
  if (armed_) {
    flag_[0] = 1;
    cudaStreamSynchronize(stream_);
  }
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  cudaFreeHost(const_cast<int32_t*>(flag_));
}

cudaEvent_t OpProfiler::event(size_t i) {
  while (events_.size() <= i) {
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreate(&e), "cudaEventCreate(profile)");
    events_.push_back(e);
  }
  return events_[i];
}

void OpProfiler::begin(std::string op, std::string shape, uint64_t bytes) {
  if (!armed_ || depth_++ > 0) return;
  std::string key = op + "|" + shape;
  if (!names_.count(key)) names_[key] = {std::move(op), std::move(shape)};
  const size_t e0 = used_++;
  cuda_check(cudaEventRecord(event(e0), stream_), "cudaEventRecord(profile)");
  pending_.push_back(Pending{std::move(key), e0, 0, bytes});
}

void OpProfiler::end() {
  if (!armed_ || --depth_ > 0) return;
  const size_t e1 = used_++;
  cuda_check(cudaEventRecord(event(e1), stream_), "cudaEventRecord(profile)");
  pending_.back().e1 = e1;
}

void OpProfiler::step_begin() {
  if (armed_) throw Error("cuda profile: step_begin twice");
  flag_[0] = 0;
  flag_[1] = 0;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  gate_kernel<<<1, 1, 0, stream_>>>(flag_dev_, kGateTimeoutNs);
  launch_check("profile gate");
  armed_ = true;
  depth_ = 0;
  used_ = 0;
  pending_.clear();
}

void OpProfiler::step_end() {
  if (!armed_) return;
  armed_ = false;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  flag_[0] = 1;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  cuda_check(cudaStreamSynchronize(stream_), "profile: synchronize");
  if (flag_[1]) ++result_.gate_timeouts;
  if (pending_.empty()) return;
  for (const Pending& p : pending_) {
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, events_[p.e0], events_[p.e1]), "cudaEventElapsedTime(profile)");
    OpProfileEntry& t = totals_[p.key];
    t.calls += 1, t.ms += ms, t.bytes += p.bytes;
  }
  float span = 0;
  cuda_check(cudaEventElapsedTime(&span, events_[pending_.front().e0], events_[pending_.back().e1]),
             "cudaEventElapsedTime(profile)");
  result_.step_ms += span;
  result_.steps += 1;
  pending_.clear();
}

OpProfile OpProfiler::take() {
  OpProfile r = result_;
  for (auto& [key, t] : totals_) {
    OpProfileEntry e = t;
    e.op = names_[key].first, e.shape = names_[key].second;
    r.ops.push_back(e);
  }
  std::sort(r.ops.begin(), r.ops.end(), [](const OpProfileEntry& a, const OpProfileEntry& b) { return a.ms > b.ms; });
  result_ = OpProfile{};
  totals_.clear();
  return r;
}

}  // namespace df::cuda
