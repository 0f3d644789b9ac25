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
  // Hybrid models (qwen35): layers with a recurrent state instead of a KV cache.
  int64_t n_layer_recurrent = 0;   // Gated DeltaNet layers among the n_layer trunk layers
  int64_t n_layer_nextn = 0;       // MTP (next-n prediction) layers stored after the trunk
  int64_t ssm_conv_kernel = 0;
  int64_t ssm_state = 0;           // head size of the delta rule (state is ssm_state^2 per head)
  int64_t ssm_k_heads = 0;
  int64_t ssm_v_heads = 0;
  // Mixture-of-experts FFNs (qwen35moe).
  int64_t n_expert = 0;            // routed experts per layer (0: dense MLP)
  int64_t n_expert_used = 0;       // experts each token is routed to
  int64_t n_ff_exp = 0;            // FF length of one expert
  int64_t n_ff_shexp = 0;          // FF length of the shared expert
  uint64_t weight_bytes = 0;       // bytes of all weights
  uint64_t bytes_per_token = 0;    // weight bytes read by one decode step
  uint64_t n_params = 0;
};

struct StateOptions {
  int64_t n_ctx = 4096;       // positions the caches hold
  int64_t max_chunk = 512;    // most tokens one forward() call takes
  bool kv_f32 = false;        // F16 KV cache unless set
};

// A copy of the part of a session's state that the KV cache rows cannot recover (recurrent
// and convolution states), taken after `pos` tokens. Restoring it rewinds the state to `pos`;
// KV rows [0, pos) must still hold the same tokens (rows past pos are overwritten later).
class StateCheckpoint {
 public:
  virtual ~StateCheckpoint() = default;
  int64_t pos = 0;
  uint64_t bytes = 0;  // memory the copy holds
};

// Per-session model state: caches and scratch. Opaque to callers.
class ModelState {
 public:
  virtual ~ModelState() = default;
  virtual int64_t n_ctx() const = 0;
  virtual int64_t max_chunk() const = 0;
  virtual uint64_t cache_bytes() const = 0;   // KV cache / recurrent state
  virtual uint64_t scratch_bytes() const = 0;  // activations
  // True when the KV cache is all the state (pure attention): forward() may then restart at
  // any position p with KV rows [0, p) intact. False when recurrent state must be restored
  // from a checkpoint (or restarted at position 0) before running from an earlier position.
  virtual bool rewindable() const = 0;
  // Copies the state as it is after `pos` tokens (pos: where the last forward() ended).
  virtual std::unique_ptr<StateCheckpoint> capture(int64_t pos) = 0;
  // Makes the state what it was when `c` was captured from this state.
  virtual void restore(const StateCheckpoint& c) = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelInfo& info() const = 0;
  virtual std::unique_ptr<ModelState> new_state(const StateOptions& opt) = 0;
  // Runs tokens[0..n) at positions pos0.. (n <= max_chunk, pos0 + n <= n_ctx). pos0 == 0
  // starts a new sequence (recurrent state reset); otherwise a non-rewindable state must be at
  // pos0 (it throws df::Error if not).
  // logits: when all_logits, n rows of n_vocab floats; otherwise the last row only. May be
  // null (no output head: prefill of a prompt's leading chunks).
  virtual void forward(ModelState& state, const int32_t* tokens, int64_t n, int64_t pos0,
                       bool all_logits, float* logits) = 0;
};

// Reads general.architecture and builds the model on the backend (throws df::Error for an
// unsupported architecture, a missing tensor or key, or a shape that does not match).
std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend);

}  // namespace df
