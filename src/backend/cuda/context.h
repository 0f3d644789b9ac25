// The CUDA backend's context: one device, one stream, the weight arena and the ops' scratch.
// Everything a kernel launch needs lives here (no global device state): two backends on two
// devices, or two on one, work side by side.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace df::cuda {

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  const cudaDeviceProp& props() const { return props_; }
  // Makes this context's device current for the calling thread (cheap when it already is).
  void make_current() const;
  // True while the stream is being captured into a graph (no allocation, no host copies).
  bool capturing() const;

  // Device scratch of at least `bytes`, reused by every op (ops run in stream order, so one
  // op's scratch is free again when the next one starts). Grows only outside a capture, to at
  // least twice its size; the buffer it outgrows stays allocated until the context ends, since
  // recorded graphs (blocks::StepGraphs: decode steps, replayed across later prefills) keep the
  // address they were captured with. The same for counters().
  void* scratch(size_t bytes);

  // At least n ints of device memory that are zero between ops: the tickets of kernels whose
  // last block finishes the op (attention's merge, argmax), each leaving them zero again.
  // Grows (zeroed) outside a capture only.
  int32_t* counters(size_t n);

  // ---- weights: one arena sized from the file, suballocated at 256-byte alignment ----
  // Checks that `bytes` fit (df::Error naming the bytes needed and free otherwise) and
  // allocates an arena for them (one per model loaded on this backend).
  void reserve_weights(uint64_t bytes);
  // Device memory for one weight of `bytes` (from the arena when reserved, else its own).
  void* weight_memory(size_t bytes);
  uint64_t weight_bytes() const { return weight_bytes_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaDeviceProp props_{};
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  int32_t* counters_ = nullptr;
  size_t counters_n_ = 0;
  std::vector<void*> arenas_;      // one per reserve_weights; weights come from the last
  uint8_t* arena_ = nullptr;
  uint64_t arena_size_ = 0, arena_used_ = 0;
  uint64_t weight_bytes_ = 0;
  std::vector<void*> own_weights_;  // weights allocated outside the arena
  std::vector<void*> retired_;      // outgrown scratch and counters, still in recorded graphs
};

// "X.YZ GiB" for messages.
std::string gib(uint64_t bytes);

}  // namespace df::cuda
