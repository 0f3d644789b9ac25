// The CUDA backend: device memory, one stream, and every op of backend.h over the kernels of
// ops/ (raw-pointer launchers; this class checks shapes and turns tensors into pointers and
// strides). Includes no CUDA header: model code and the CLI see only this.
//
// Weights are uploaded once and repacked into the matvec kernels' GPU layout (matvec/:
// quant bits and scales in separate 16-byte aligned planes; reserve_weights sizes one arena
// from the file; a model that does not fit is a df::Error naming the bytes needed and free).
// matmul: n <= 8 rows through matvec/ (every format; row r's result is the same bits for any
// n); more rows dequantize bounded tiles of weight rows (get_rows of the packed layout into
// scratch) and multiply them with a tiled f32 kernel. KV caches are F16 on the device,
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

namespace df::cudamv {
struct PackedWeight;
}

namespace df::cuda {

class CudaContext;
struct PackedWeights;

struct CudaOptions {
  int device = 0;
};

// CUDA devices this process can use; 0 (and the reason in *why) without a driver or a GPU.
int probe_devices(std::string* why);

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

  void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) override;
  void matmul(const Tensor& W, const Tensor& x, const Tensor& y) override;
  void rope(const Tensor& x, const Tensor& pos, const RopeParams& p) override;
  KvCache alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) override;
  void kv_store(KvCache& cache, const Tensor& k, const Tensor& v, const Tensor& pos) override;
  void attention(const Tensor& q, const KvCache& cache, const Tensor& pos, const AttentionParams& p,
                 const Tensor& out) override;
  void argmax(const Tensor& logits, const Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& x, const Tensor& y) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& y) override;
  void sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) override;
  void softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) override;
  void l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) override;
  void ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                const Tensor& snapshots) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, float scale, const Tensor& out, const Tensor& snapshots) override;
  // Mixture of experts (qwen35moe): not on the GPU yet; each throws a clear error.
  void moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids,
                 const Tensor& weights) override;
  void matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) override;
  void moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                   const Tensor& out) override;

  // ---- graphs ----
  std::unique_ptr<OpGraph> record(const std::function<void()>& ops) override;
  void replay(OpGraph& g) override;

  // ---- device facts for benchmarks ----
  std::string device_name() const;
  uint64_t device_memory() const;
  // Read bandwidth in bytes/s measured with a pure read kernel over `bytes` of device memory
  // (median of `reps` timed passes after a warm-up).
  double measure_read_bandwidth(size_t bytes, int reps);

  CudaContext& context() { return *ctx_; }

 private:
  const cudamv::PackedWeight& packed(const Tensor& W) const;  // the GPU layout of a weight
  void matvec_rows(const cudamv::PackedWeight& W, const Tensor& x, const Tensor& y);
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<PackedWeights> weights_;
};

}  // namespace df::cuda
