// Op tests through the Backend interface, in the style of ggml's test-backend-ops: every case
// builds its inputs with the backend's own allocation and upload, runs on the backend under
// test and on the reference backend, downloads the outputs, and compares them with the
// case's normalised-error budget mse(ref, got) / mse(ref, 0).
//
// Backends are named as the factory knows them: "cpu/scalar" (the reference), "cpu/avx2",
// "cpu/avx512" (where this CPU has them), and "cuda" in builds with the CUDA backend on a
// machine with a GPU. A new backend plugs in by adding its name to backend_names().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/cpu/cpu_backend.h"
#include "quant/cpu/kernels.h"

namespace df::optest {

inline std::unique_ptr<Backend> make_named(const std::string& name) {
  BackendOptions o;
  o.cpu.threads = 2;
  if (name.rfind("cpu/", 0) == 0) {
    o.device = "cpu";
    o.cpu.isa = name.substr(4);
  } else {
    o.device = name;
  }
  return make_backend(o);
}

// The backends under test on this machine and build (the reference excluded).
inline std::vector<std::string> backend_names() {
  std::vector<std::string> out;
  if (cpu::best_isa() >= cpu::Isa::AVX2) out.push_back("cpu/avx2");
  if (cpu::best_isa() >= cpu::Isa::AVX512) out.push_back("cpu/avx512");
#ifdef DF_HAVE_CUDA
  if (cuda::device_count() > 0) out.push_back("cuda");
#endif
  return out;
}

inline const char* kReference = "cpu/scalar";

// Device data of one case, made with the backend's own alloc / upload / download.
class DeviceData {
 public:
  explicit DeviceData(Backend& b) : b_(b) {}
  Tensor f32(const std::vector<float>& v, int64_t cols) {
    Tensor t = alloc_tensor(b_, GgmlType::F32, cols, static_cast<int64_t>(v.size()) / cols, bufs_);
    b_.upload(t, v.data(), t.nbytes());
    return t;
  }
  Tensor i32(const std::vector<int32_t>& v) {
    Tensor t = alloc_tensor(b_, GgmlType::I32, 1, static_cast<int64_t>(v.size()), bufs_);
    b_.upload(t, v.data(), t.nbytes());
    return t;
  }
  Tensor zeros(int64_t cols, int64_t rows, GgmlType type = GgmlType::F32) {
    Tensor t = alloc_tensor(b_, type, cols, rows, bufs_);
    std::vector<uint8_t> z(t.nbytes(), 0);
    b_.upload(t, z.data(), z.size());
    return t;
  }
  // A weight [rows, cols] of `type` from floats (the reference quantiser on the host).
  Tensor weight(GgmlType type, const std::vector<float>& v, int64_t cols) {
    const int64_t rows = static_cast<int64_t>(v.size()) / cols;
    const size_t rb = row_bytes(type, cols);
    auto host = std::make_shared<std::vector<uint8_t>>(rb * static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      cpu::quantize_row_ref(type, v.data() + r * cols, host->data() + rb * static_cast<size_t>(r), cols);
    host_.push_back(host);
    return b_.weight(type, cols, rows, host->data());
  }
  std::vector<float> read(const Tensor& t) {
    std::vector<float> v(static_cast<size_t>(t.cols * t.rows));
    const size_t rb = static_cast<size_t>(t.cols) * sizeof(float);
    for (int64_t r = 0; r < t.rows; ++r) b_.download(t.slice_rows(r, 1), v.data() + r * t.cols, rb);
    return v;
  }
  std::vector<float> read_i32(const Tensor& t) {  // as floats, to share the comparison
    std::vector<int32_t> v(static_cast<size_t>(t.rows));
    b_.download(t, v.data(), v.size() * sizeof(int32_t));
    return std::vector<float>(v.begin(), v.end());
  }

 private:
  Backend& b_;
  std::vector<std::shared_ptr<Buffer>> bufs_;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> host_;
};

struct OpCase {
  std::string name;
  double max_nmse;  // budget against the reference backend (0: the same bits)
  // Builds inputs on `b`, runs the op(s), returns the outputs concatenated.
  std::function<std::vector<float>(Backend& b, DeviceData& d)> run;
};

}  // namespace df::optest
