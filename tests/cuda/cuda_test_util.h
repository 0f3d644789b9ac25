// Helpers of the CUDA tests: the skip when no GPU is present, host <-> device tensors, and
// the CPU backend as the reference (its SCALAR kernels, one thread).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_options.h"
#include "diskformer/engine.h"
#include "runtime/backend_options.h"

namespace df::cudatest {

// The CUDA backend, or null (and the test skipped with the reason) when no GPU is usable.
inline cuda::CudaBackend* gpu() {
  static std::unique_ptr<cuda::CudaBackend> b;
  static std::string why;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (cuda::probe_devices(&why) > 0) b = std::make_unique<cuda::CudaBackend>(cuda::CudaOptions{});
  }
  return b.get();
}

// The CUDA options the engine runs with (EngineOptions' defaults through the engine's own
// mapping: runtime/backend_options.h, cuda/cuda_options.h). gpu() keeps CudaOptions{}, the
// plain paths that most op tests compare; the shipped switches (fused DeltaNet, the MoE GEMM,
// PDL on routed launches, streamed experts in the fused block, ...) are on here.
inline cuda::CudaOptions shipped_cuda_options() {
  static const EngineOptions eo;  // static: gcc 12 saw its strings' temporaries as maybe uninitialised
  static const BackendOptions bo = backend_options(eo);
  return cuda::cuda_options(bo);
}
// A backend with them, or null where no GPU is usable (after DF_REQUIRE_GPU: never).
inline cuda::CudaBackend* gpu_shipped() {
  static std::unique_ptr<cuda::CudaBackend> b;
  if (!b && gpu()) b = std::make_unique<cuda::CudaBackend>(shipped_cuda_options());
  return b.get();
}

#define DF_REQUIRE_GPU()                                                          \
  do {                                                                            \
    if (!::df::cudatest::gpu()) GTEST_SKIP() << "no CUDA device: test skipped";   \
  } while (0)

inline cpu::CpuBackend& cpu_ref() {
  static cpu::CpuBackend b(cpu::CpuOptions{1, cpu::Isa::SCALAR});
  return b;
}
// The CPU backend as the engine runs it (every thread, the best ISA): whole-model references.
inline cpu::CpuBackend& cpu_fast() {
  static cpu::CpuBackend b(cpu::CpuOptions{});
  return b;
}

// A dense tensor on backend `b` holding `data` (rows of `cols` elements of `type`).
struct Held {
  Tensor t;
  std::vector<std::shared_ptr<Buffer>> owner;
};
inline Held put(Backend& b, GgmlType type, int64_t cols, int64_t rows, const void* data) {
  Held h;
  h.t = alloc_tensor(b, type, cols, rows, h.owner);
  if (data) b.upload(h.t, data, h.t.nbytes());
  return h;
}
inline Held put_f32(Backend& b, const std::vector<float>& v, int64_t cols) {
  return put(b, GgmlType::F32, cols, static_cast<int64_t>(v.size()) / cols, v.data());
}
// Positions pos0 .. pos0 + n - 1 (or ids) as an I32 [n, 1] tensor.
inline Held put_i32(Backend& b, const std::vector<int32_t>& v) {
  return put(b, GgmlType::I32, 1, static_cast<int64_t>(v.size()), v.data());
}
inline Held positions(Backend& b, int64_t pos0, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i);
  return put_i32(b, p);
}
inline std::vector<float> get_f32(Backend& b, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.rows * t.cols));
  std::vector<uint8_t> raw(t.nbytes());
  b.download(t, raw.data(), raw.size());
  for (int64_t r = 0; r < t.rows; ++r)
    std::memcpy(out.data() + r * t.cols, raw.data() + t.stride * static_cast<size_t>(r),
                static_cast<size_t>(t.cols) * sizeof(float));
  return out;
}

}  // namespace df::cudatest
