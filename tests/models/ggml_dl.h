// Loads llama.cpp's prebuilt ggml libraries with dlopen for bit-level comparisons:
// libggml-base.so (ggml_get_type_traits: to_float, from_float_ref) and the CPU backend
// variant ggml itself would pick on this machine (highest ggml_backend_score), for
// ggml_get_type_traits_cpu (from_float, vec_dot). Only the ggml C API is used.
#pragma once
#include <dlfcn.h>

#include <filesystem>
#include <string>

#include "ggml-cpu.h"
#include "ggml.h"

namespace df::test {

// DF_LLAMA_LIB is set by tests/CMakeLists.txt; empty when no llama.cpp build is configured.
inline std::string llama_lib_dir() { return DF_LLAMA_LIB; }

class GgmlLibs {
 public:
  using TypeTraitsFn = const ggml_type_traits* (*)(ggml_type);
  using CpuTraitsFn = const ggml_type_traits_cpu* (*)(ggml_type);

  // Empty error() on success.
  GgmlLibs() {
    const std::string dir = llama_lib_dir();
    if (dir.empty()) {
      error_ = "DF_LLAMA_LIB not configured";
      return;
    }
    base_ = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!base_) {
      error_ = dlerror();
      return;
    }
    type_traits_ = reinterpret_cast<TypeTraitsFn>(dlsym(base_, "ggml_get_type_traits"));
    int best = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("libggml-cpu-", 0) != 0 || e.path().extension() != ".so") continue;
      void* h = dlopen(e.path().c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!h) continue;
      auto score = reinterpret_cast<int (*)()>(dlsym(h, "ggml_backend_score"));
      const int s = score ? score() : 0;
      if (s > best) {
        if (cpu_) dlclose(cpu_);
        cpu_ = h;
        best = s;
        cpu_variant_ = name;
      } else {
        dlclose(h);
      }
    }
    if (cpu_) {
      if (auto init = reinterpret_cast<void (*)()>(dlsym(cpu_, "ggml_cpu_init"))) init();
      cpu_traits_ = reinterpret_cast<CpuTraitsFn>(dlsym(cpu_, "ggml_get_type_traits_cpu"));
    }
    if (!type_traits_) error_ = "ggml_get_type_traits not found in libggml-base.so";
  }
  GgmlLibs(const GgmlLibs&) = delete;
  GgmlLibs& operator=(const GgmlLibs&) = delete;
  ~GgmlLibs() {
    if (cpu_) dlclose(cpu_);
    if (base_) dlclose(base_);
  }

  const std::string& error() const { return error_; }
  const ggml_type_traits* traits(ggml_type t) const { return type_traits_(t); }
  // nullptr when no CPU variant could be loaded.
  const ggml_type_traits_cpu* cpu_traits(ggml_type t) const {
    return cpu_traits_ ? cpu_traits_(t) : nullptr;
  }
  const std::string& cpu_variant() const { return cpu_variant_; }

 private:
  void* base_ = nullptr;
  void* cpu_ = nullptr;
  TypeTraitsFn type_traits_ = nullptr;
  CpuTraitsFn cpu_traits_ = nullptr;
  std::string cpu_variant_, error_;
};

}  // namespace df::test
