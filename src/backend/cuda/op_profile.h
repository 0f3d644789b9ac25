// Per-op timing of eagerly run steps (`diskformer bench --device cuda --profile`): CUDA events
// around each backend op, folded per (op, shape). Owned by a CudaBackend (no global state);
// off unless CudaBackend::set_profiling(true).
//
// A profiled step is enqueued behind a gate kernel that spins on a host-mapped flag, so that
// the device runs the step's ops back to back as a graph would, not starved by the host's
// launch rate; step_end() opens the gate, waits, and folds the step's event times. The gate
// gives up after a timeout (a host sync inside the step, or a full launch queue): such steps
// are counted in gate_timeouts (their op times then include host gaps).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"

namespace df::cuda {

class OpProfiler {
 public:
  explicit OpProfiler(cudaStream_t s);
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  bool armed() const { return armed_; }
  // Around one op (only between step_begin and step_end; nested calls, e.g. a fused op's
  // unfused fallback, count to the outermost).
  void begin(std::string op, std::string shape, uint64_t bytes);
  void end();
  void step_begin();
  void step_end();
  OpProfile take();  // the totals so far, then reset

 private:
  cudaEvent_t event(size_t i);
  cudaStream_t stream_;
  bool armed_ = false;
  int depth_ = 0;
  volatile int32_t* flag_ = nullptr;  // host-mapped: [0] gate open, [1] the gate timed out
  int32_t* flag_dev_ = nullptr;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
  struct Pending {
    std::string key;
    size_t e0, e1;
    uint64_t bytes;
  };
  std::vector<Pending> pending_;
  std::map<std::string, std::pair<std::string, std::string>> names_;  // key -> (op, shape)
  std::map<std::string, OpProfileEntry> totals_;
  OpProfile result_;
};

}  // namespace df::cuda

namespace df::cuda {

// "q8_0 4096x2560": a packed weight's type and shape (rows x cols).
std::string weight_shape(const cudamv::PackedWeight& P);

// One op's timing scope: nothing unless the profiler is armed (shape() is called only then).
class OpScope {
 public:
  OpScope(OpProfiler* p, const char* op) : OpScope(p, op, 0, [] { return std::string(); }) {}
  template <class Shape>
  OpScope(OpProfiler* p, const char* op, uint64_t bytes, Shape&& shape) : p_(p && p->armed() ? p : nullptr) {
    if (p_) p_->begin(op, shape(), bytes);
  }
  ~OpScope() { close(); }
  void close() {  // ends the op before the scope does (then a no-op)
    if (p_) p_->end();
    p_ = nullptr;
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  OpProfiler* p_;
};

}  // namespace df::cuda
