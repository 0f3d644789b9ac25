// The CUDA backend: device memory, one stream, and every op of backend.h over the kernels of
// ops/ (raw-pointer launchers; this class checks shapes and turns tensors into pointers and
// strides). Includes no CUDA header: model code and the CLI see only this.
//
// Weights are uploaded once (reserve_weights sizes one arena from the file; a model that does
// not fit is a df::Error naming the bytes needed and free). KV caches are F16 on the device,
// K and V each [capacity, kv_dim] (one row per position). No op synchronises or allocates
// (scratch grows outside graph captures only); download() is the one host read.
//
// Graphs: record(ops) captures what `ops` launches into a CUDA graph instead of running it;
// replay() launches the graph. Ops that read per-token data from device tensors (positions,
// ids) replay correctly after those tensors are re-uploaded.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace df::cuda {

class CudaContext;

struct CudaOptions {
  int device = 0;
};

// CUDA devices this process can use; 0 (and the reason in *why) without a driver or a GPU.
int device_count(std::string* why = nullptr);

// A recorded sequence of ops (a CUDA graph, instantiated).
class OpGraph {
 public:
  virtual ~OpGraph() = default;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& opt);
  ~CudaBackend() override;
  std::string name() const override;

  std::shared_ptr<Buffer> alloc(size_t bytes) override;
  void reserve_weights(uint64_t bytes) override;
  Tensor weight(GgmlType type, int64_t cols, int64_t rows, const void* host) override;
  void upload(const Tensor& dst, const void* src, size_t bytes) override;
  void download(const Tensor& src, void* dst, size_t bytes) override;
  void synchronize() override;

  void get_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) override;
  void matmul(const Tensor& W, const Tensor& x, const Tensor& y) override;
  void rope_neox(const Tensor& x, int32_t n_head, int32_t head_dim, int32_t n_rot, int64_t pos0,
                 float freq_base) override;
  KvCache alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) override;
  void kv_store(KvCache& cache, const Tensor& k, const Tensor& v, int64_t pos0) override;
  void attention(const Tensor& q, const KvCache& cache, int64_t pos0, const AttentionParams& p,
                 const Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& x, const Tensor& y) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& y) override;
  void sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) override;
  void softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) override;
  void l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) override;
  void ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, float scale, const Tensor& out) override;

  // ---- ops of the forward interface (issue 8) with per-token data in device tensors ----
  // ids, pos: I32 tensors [n, 1] on the device.
  void get_rows_dev(const Tensor& table, const Tensor& ids, const Tensor& out);
  void rope_dev(const Tensor& x, const Tensor& pos, int32_t n_head, int32_t head_dim, int32_t n_rot, float freq_base,
                const int32_t sections[4]);
  void kv_store_dev(KvCache& cache, const Tensor& k, const Tensor& v, const Tensor& pos);
  void attention_dev(const Tensor& q, const KvCache& cache, const Tensor& pos, const AttentionParams& p,
                     const Tensor& out);
  // out [n, 1] i32 = argmax of each row of logits [n, V] f32 (lowest index among equals).
  void argmax(const Tensor& logits, const Tensor& out);

  // ---- graphs ----
  std::unique_ptr<OpGraph> record(const std::function<void()>& ops);
  void replay(OpGraph& g);

  // ---- device facts for benchmarks ----
  std::string device_name() const;
  uint64_t device_memory() const;
  // Read bandwidth in bytes/s measured with a pure read kernel over `bytes` of device memory
  // (median of `reps` timed passes after a warm-up).
  double measure_read_bandwidth(size_t bytes, int reps);

  CudaContext& context() { return *ctx_; }

 private:
  void matmul_rows(const Tensor& W, const Tensor& x, const Tensor& y);
  std::unique_ptr<CudaContext> ctx_;
};

}  // namespace df::cuda
