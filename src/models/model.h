// The architecture-independent model interface. An architecture (one file each: qwen3.cpp,
// later qwen35.cpp, qwen35moe.cpp) reads its hyperparameters and weights from a GGUF file,
// creates per-session state (KV cache, recurrent state) and runs a forward pass over a
// chunk of tokens on a Backend.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace df::gguf {
class File;
}

namespace df {

struct ModelInfo {
  std::string arch;          // general.architecture
  std::string name;          // general.name (may be empty)
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float rope_base = 10000.0f;
  float rms_eps = 1e-6f;
  bool tied_output = false;
  uint64_t weight_bytes = 0;       // bytes of all weights
  uint64_t bytes_per_token = 0;    // weight bytes read by one decode step
  uint64_t n_params = 0;
};

struct StateOptions {
  int64_t n_ctx = 4096;       // positions the caches hold
  int64_t max_chunk = 512;    // most tokens one forward() call takes
  bool kv_f32 = false;        // F16 KV cache unless set
};

// Per-session model state: caches and scratch. Opaque to callers.
class ModelState {
 public:
  virtual ~ModelState() = default;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t max_chunk() const = 0;
  virtual uint64_t cache_bytes() const = 0;   // KV cache / recurrent state
  virtual uint64_t scratch_bytes() const = 0;  // activations
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<ModelState> new_state(const StateOptions& opt) = 0;
  // Runs tokens[0..n) at positions pos0.. (n <= max_chunk, pos0 + n <= n_ctx).
  // logits: when all_logits, n rows of n_vocab floats; otherwise the last row only. May be
  // null (no output head: prefill of a prompt's leading chunks).
  virtual void forward(ModelState& state, const int32_t* tokens, int64_t n, int64_t pos0,
                       bool all_logits, float* logits) = 0;
};

// Reads general.architecture and builds the model on the backend (throws df::Error for an
// unsupported architecture, a missing tensor or key, or a shape that does not match).
std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend);

}  // namespace df
