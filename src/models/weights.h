// Looking up weights in a GGUF file with their expected shapes, for architecture loaders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace df::gguf {
class File;
}

namespace df {

class WeightLoader {
 public:
  WeightLoader(const gguf::File& f, Backend& b) : file_(f), backend_(b) {}
  // The tensor `name` with dims {cols, rows} (a 1-D tensor: rows = 1). Throws df::Error if it
  // is missing or its shape differs ("tensor 'x' has shape [a, b], expected [c, d]").
  Tensor get(const std::string& name, int64_t cols, int64_t rows = 1);
  Tensor get_f32(const std::string& name, int64_t cols);  // 1-D, must be F32
  // A stack of n matrices with dims {cols, rows, n} (MoE experts, ffn_*_exps), as one tensor
  // of n * rows rows: matrix e is rows [e * rows, (e + 1) * rows).
  Tensor get_stack(const std::string& name, int64_t cols, int64_t rows, int64_t n);
  bool has(const std::string& name) const;
  // The file's bytes of tensor `name` (what get() gave the backend); throws if it is missing.
  const void* host(const std::string& name) const;
  uint64_t bytes_loaded() const { return bytes_; }

 private:
  // The tensor `name` with dims `want`, seen as a [rows, cols] matrix, or (n_stack > 0) as a
  // stack of n_stack such matrices (Backend::weight_stack).
  Tensor get_dims(const std::string& name, const std::vector<int64_t>& want, int64_t cols, int64_t rows,
                  int64_t n_stack = 0);
  const gguf::File& file_;
  Backend& backend_;
  uint64_t bytes_ = 0;
};

}  // namespace df
