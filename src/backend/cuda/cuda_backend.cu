#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/argmax.cuh"
#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/elementwise.cuh"
#include "backend/cuda/ops/get_rows.cuh"
#include "backend/cuda/ops/kv_store.cuh"
#include "backend/cuda/ops/l2_norm.cuh"
#include "backend/cuda/ops/matmul.cuh"
#include "backend/cuda/ops/read_bw.cuh"
#include "backend/cuda/ops/rms_norm.cuh"
#include "backend/cuda/ops/rope.cuh"
#include "backend/cuda/ops/ssm_conv.cuh"

namespace df::cuda {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cuda backend: ") + what);
}

class DeviceBuffer final : public Buffer {
 public:
  DeviceBuffer(const CudaContext& ctx, size_t bytes) : ctx_(ctx), size_(bytes) {
    ctx.make_current();
    const cudaError_t e = cudaMalloc(&data_, bytes == 0 ? 256 : bytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      throw Error("cuda: out of device memory allocating " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                  "), " + std::to_string(free_b) + " bytes (" + gib(free_b) + ") free of " + gib(total_b));
    }
    // Zeroed like host buffers: fresh caches and states hold no garbage.
    cuda_check(cudaMemsetAsync(data_, 0, bytes == 0 ? 256 : bytes, ctx.stream()), "cudaMemset");
  }
  ~DeviceBuffer() override {
    cudaSetDevice(ctx_.device());
    cudaFree(data_);
  }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  const CudaContext& ctx_;
  void* data_ = nullptr;
  size_t size_;
};

class CudaGraph final : public OpGraph {
 public:
  explicit CudaGraph(cudaGraphExec_t e) : exec(e) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec); }
  cudaGraphExec_t exec;
};

bool is_f32(const Tensor& t) { return t.type == GgmlType::F32; }
int64_t fstride(const Tensor& t) { return static_cast<int64_t>(t.stride / sizeof(float)); }
float* fp(const Tensor& t) { return static_cast<float*>(t.data); }
Mat mat(const Tensor& t) { return {fp(t), fstride(t)}; }
CMat cmat(const Tensor& t) { return {fp(t), fstride(t)}; }
bool same_shape(const Tensor& a, const Tensor& b) { return a.cols == b.cols && a.rows == b.rows; }

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
}

CudaBackend::CudaBackend(const CudaOptions& opt) {
  std::string why;
  const int n = device_count(&why);
  if (n == 0) throw Error("cuda: no usable GPU (" + why + ")");
  if (opt.device < 0 || opt.device >= n)
    throw Error("cuda: device " + std::to_string(opt.device) + " does not exist (" + std::to_string(n) + " found)");
  ctx_ = std::make_unique<CudaContext>(opt.device);
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::name() const {
  return "cuda (" + std::string(ctx_->props().name) + ", device " + std::to_string(ctx_->device()) + ")";
}

std::string CudaBackend::device_name() const { return ctx_->props().name; }
uint64_t CudaBackend::device_memory() const { return ctx_->props().totalGlobalMem; }

std::shared_ptr<Buffer> CudaBackend::alloc(size_t bytes) {
  check(!ctx_->capturing(), "alloc while a graph is captured");
  return std::make_shared<DeviceBuffer>(*ctx_, bytes);
}

void CudaBackend::reserve_weights(uint64_t bytes) {
  ctx_->make_current();
  ctx_->reserve_weights(bytes);
}

Tensor CudaBackend::weight(GgmlType type, int64_t cols, int64_t rows, const void* host) {
  ctx_->make_current();
  Tensor t;
  t.type = type;
  t.cols = cols;
  t.rows = rows;
  t.stride = row_bytes(type, cols);
  t.data = ctx_->weight_memory(t.nbytes());
  cuda_check(cudaMemcpy(t.data, host, t.nbytes(), cudaMemcpyHostToDevice), "upload of a weight");
  return t;
}

void CudaBackend::upload(const Tensor& dst, const void* src, size_t bytes) {
  check(bytes <= dst.nbytes(), "upload larger than tensor");
  ctx_->make_current();
  cuda_check(cudaMemcpyAsync(dst.data, src, bytes, cudaMemcpyHostToDevice, ctx_->stream()), "upload");
}

void CudaBackend::download(const Tensor& src, void* dst, size_t bytes) {
  check(bytes <= src.nbytes(), "download larger than tensor");
  ctx_->make_current();
  cuda_check(cudaMemcpyAsync(dst, src.data, bytes, cudaMemcpyDeviceToHost, ctx_->stream()), "download");
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "download: synchronize");
}

void CudaBackend::synchronize() {
  ctx_->make_current();
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "synchronize");
}

// ---- ops ----

void CudaBackend::get_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) {
  check(is_f32(out) && out.cols == table.cols && out.rows >= n, "get_rows shapes");
  for (int64_t i = 0; i < n; ++i) check(ids[i] >= 0 && ids[i] < table.rows, "get_rows id out of range");
  ctx_->make_current();
  auto* dev_ids = static_cast<int32_t*>(ctx_->scratch(static_cast<size_t>(n) * sizeof(int32_t)));
  cuda_check(cudaMemcpyAsync(dev_ids, ids, static_cast<size_t>(n) * sizeof(int32_t), cudaMemcpyHostToDevice,
                             ctx_->stream()),
             "get_rows: upload ids");
  launch_get_rows(table.type, table.data, table.stride, table.rows, table.cols, dev_ids, n, fp(out), fstride(out),
                  ctx_->stream());
}

void CudaBackend::get_rows_dev(const Tensor& table, const Tensor& ids, const Tensor& out) {
  check(ids.type == GgmlType::I32 && ids.cols == 1, "get_rows ids must be I32 [n, 1]");
  check(is_f32(out) && out.cols == table.cols && out.rows >= ids.rows, "get_rows shapes");
  check(ids.stride == sizeof(int32_t), "get_rows ids must be dense");
  ctx_->make_current();
  launch_get_rows(table.type, table.data, table.stride, table.rows, table.cols, static_cast<const int32_t*>(ids.data),
                  ids.rows, fp(out), fstride(out), ctx_->stream());
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) {
  check(is_f32(x) && is_f32(w) && is_f32(y), "rms_norm types must be f32");
  check(x.cols == w.cols && same_shape(x, y), "rms_norm shapes");
  ctx_->make_current();
  launch_rms_norm(fp(x), fstride(x), fp(w), eps, fp(y), fstride(y), x.rows, x.cols, ctx_->stream());
}

void CudaBackend::matmul(const Tensor& W, const Tensor& x, const Tensor& y) {
  check(is_f32(x) && is_f32(y), "matmul activations must be f32");
  check(W.cols == x.cols && y.cols == W.rows && y.rows == x.rows, "matmul shapes");
  check(W.cols % 32 == 0, "matmul: row length must be a multiple of 32");
  check(x.stride % 16 == 0, "matmul: activation rows must be 16-byte aligned");
  ctx_->make_current();
  matmul_rows(W, x, y);
}

void CudaBackend::matmul_rows(const Tensor& W, const Tensor& x, const Tensor& y) {
  const int64_t n = x.rows;
  if (n <= kMatvecMaxRows) {
    launch_matvec_simple(W.type, W.data, W.stride, W.rows, W.cols, fp(x), fstride(x), n, fp(y), fstride(y),
                         ctx_->stream());
    return;
  }
  if (matmul_tiled_supported(W.type)) {
    launch_matmul_tiled(W.type, W.data, W.stride, W.rows, W.cols, fp(x), fstride(x), n, fp(y), fstride(y),
                        ctx_->stream());
    return;
  }
  // No tile decoder for this format: the matvec kernel over chunks of rows (correct; each
  // chunk reads the matrix again).
  for (int64_t r0 = 0; r0 < n; r0 += kMatvecMaxRows)
    matmul_rows(W, x.slice_rows(r0, std::min(kMatvecMaxRows, n - r0)), y.slice_rows(r0, std::min(kMatvecMaxRows, n - r0)));
}

namespace {
RopeArgs rope_args(int32_t n_head, int32_t head_dim, int32_t n_rot, float freq_base, const int32_t* sections) {
  RopeArgs a;
  a.n_head = n_head;
  a.head_dim = head_dim;
  a.n_rot = n_rot;
  a.theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  if (sections)
    for (int i = 0; i < 4; ++i) a.sections[i] = sections[i];
  return a;
}
}  // namespace

void CudaBackend::rope_neox(const Tensor& x, int32_t n_head, int32_t head_dim, int32_t n_rot, int64_t pos0,
                            float freq_base) {
  check(is_f32(x) && x.cols == static_cast<int64_t>(n_head) * head_dim && n_rot <= head_dim && n_rot % 2 == 0,
        "rope shapes");
  ctx_->make_current();
  launch_rope_neox(fp(x), fstride(x), x.rows, rope_args(n_head, head_dim, n_rot, freq_base, nullptr), nullptr, pos0,
                   ctx_->stream());
}

void CudaBackend::rope_dev(const Tensor& x, const Tensor& pos, int32_t n_head, int32_t head_dim, int32_t n_rot,
                           float freq_base, const int32_t sections[4]) {
  check(is_f32(x) && x.cols == static_cast<int64_t>(n_head) * head_dim && n_rot <= head_dim && n_rot % 2 == 0,
        "rope shapes");
  check(pos.type == GgmlType::I32 && pos.rows == x.rows && pos.stride == sizeof(int32_t), "rope pos must be I32 [n, 1]");
  ctx_->make_current();
  launch_rope_neox(fp(x), fstride(x), x.rows, rope_args(n_head, head_dim, n_rot, freq_base, sections),
                   static_cast<const int32_t*>(pos.data), 0, ctx_->stream());
}

KvCache CudaBackend::alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) {
  check(type == GgmlType::F16, "the KV cache on the GPU is F16 (--kv-f32 is a CPU option)");
  check(n_ctx > 0 && kv_dim > 0, "KV cache shape");
  KvCache c;
  c.n_ctx = n_ctx;
  c.kv_dim = kv_dim;
  c.type = type;
  c.k = alloc_tensor(*this, type, kv_dim, n_ctx, c.buffers);  // [n_ctx, kv_dim]
  c.v = alloc_tensor(*this, type, kv_dim, n_ctx, c.buffers);  // [n_ctx, kv_dim]
  return c;
}

void CudaBackend::kv_store(KvCache& c, const Tensor& k, const Tensor& v, int64_t pos0) {
  check(is_f32(k) && is_f32(v) && k.cols == c.kv_dim && v.cols == c.kv_dim && k.rows == v.rows, "kv_store shapes");
  check(pos0 >= 0 && pos0 + k.rows <= c.n_ctx, "kv_store past the cache");
  ctx_->make_current();
  launch_kv_store(fp(k), fstride(k), fp(v), fstride(v), k.rows, c.kv_dim, static_cast<__half*>(c.k.data),
                  static_cast<__half*>(c.v.data), nullptr, pos0, ctx_->stream());
}

void CudaBackend::kv_store_dev(KvCache& c, const Tensor& k, const Tensor& v, const Tensor& pos) {
  check(is_f32(k) && is_f32(v) && k.cols == c.kv_dim && v.cols == c.kv_dim && k.rows == v.rows, "kv_store shapes");
  check(pos.type == GgmlType::I32 && pos.rows == k.rows && pos.stride == sizeof(int32_t), "kv_store pos must be I32 [n, 1]");
  ctx_->make_current();
  launch_kv_store(fp(k), fstride(k), fp(v), fstride(v), k.rows, c.kv_dim, static_cast<__half*>(c.k.data),
                  static_cast<__half*>(c.v.data), static_cast<const int32_t*>(pos.data), 0, ctx_->stream());
}

namespace {
AttnArgs attn_args(const KvCache& c, const AttentionParams& p) {
  AttnArgs a;
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.head_dim = p.head_dim;
  a.scale = p.scale;
  a.n_ctx = c.n_ctx;
  return a;
}
void check_attention(const Tensor& q, const KvCache& c, const AttentionParams& p, const Tensor& out) {
  check(is_f32(q) && is_f32(out), "attention q/out must be f32");
  check(q.cols == static_cast<int64_t>(p.n_head) * p.head_dim && out.cols == q.cols && out.rows == q.rows,
        "attention q/out shapes");
  check(p.n_head_kv > 0 && c.kv_dim == static_cast<int64_t>(p.n_head_kv) * p.head_dim && p.n_head % p.n_head_kv == 0,
        "attention head counts");
  check(c.type == GgmlType::F16, "attention needs an F16 cache");
  check(attention_head_dim_supported(p.head_dim), "attention head_dim must be 32, 64, 128 or 256");
}
}  // namespace

void CudaBackend::attention(const Tensor& q, const KvCache& c, int64_t pos0, const AttentionParams& p,
                            const Tensor& out) {
  check_attention(q, c, p, out);
  check(pos0 >= 0 && pos0 + q.rows <= c.n_ctx, "attention past the cache");
  ctx_->make_current();
  const AttnArgs a = attn_args(c, p);
  float* scratch = static_cast<float*>(ctx_->scratch(attention_scratch_floats(q.rows, a) * sizeof(float) + 16));
  launch_attention(fp(q), fstride(q), q.rows, static_cast<const __half*>(c.k.data),
                   static_cast<const __half*>(c.v.data), c.kv_dim, nullptr, pos0, a, scratch, fp(out), fstride(out),
                   ctx_->stream());
}

void CudaBackend::attention_dev(const Tensor& q, const KvCache& c, const Tensor& pos, const AttentionParams& p,
                                const Tensor& out) {
  check_attention(q, c, p, out);
  check(pos.type == GgmlType::I32 && pos.rows == q.rows && pos.stride == sizeof(int32_t), "attention pos must be I32 [n, 1]");
  ctx_->make_current();
  const AttnArgs a = attn_args(c, p);
  float* scratch = static_cast<float*>(ctx_->scratch(attention_scratch_floats(q.rows, a) * sizeof(float) + 16));
  launch_attention(fp(q), fstride(q), q.rows, static_cast<const __half*>(c.k.data),
                   static_cast<const __half*>(c.v.data), c.kv_dim, static_cast<const int32_t*>(pos.data), 0, a,
                   scratch, fp(out), fstride(out), ctx_->stream());
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check(is_f32(gate) && is_f32(up) && is_f32(out) && same_shape(gate, up) && same_shape(gate, out), "swiglu shapes");
  ctx_->make_current();
  launch_swiglu(cmat(gate), cmat(up), mat(out), gate.rows, gate.cols, ctx_->stream());
}

void CudaBackend::add(const Tensor& x, const Tensor& y) {
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "add shapes");
  ctx_->make_current();
  launch_add(mat(x), cmat(y), x.rows, x.cols, ctx_->stream());
}

void CudaBackend::copy(const Tensor& src, const Tensor& dst) {
  check(same_shape(src, dst) && src.type == dst.type, "copy shapes");
  ctx_->make_current();
  if (src.rows == 0) return;
  const size_t rb = row_bytes(src.type, src.cols);
  cuda_check(cudaMemcpy2DAsync(dst.data, dst.stride, src.data, src.stride, rb, static_cast<size_t>(src.rows),
                               cudaMemcpyDeviceToDevice, ctx_->stream()),
             "copy");
}

void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& y) {
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "unary shapes");
  ctx_->make_current();
  const Unary u = op == UnaryOp::SILU ? Unary::SILU : op == UnaryOp::SIGMOID ? Unary::SIGMOID : Unary::SOFTPLUS;
  launch_unary(u, cmat(x), mat(y), x.rows, x.cols, ctx_->stream());
}

void CudaBackend::sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) {
  check(is_f32(gate) && is_f32(x) && is_f32(out) && same_shape(gate, x) && same_shape(x, out), "sigmoid_mul shapes");
  ctx_->make_current();
  launch_sigmoid_mul(cmat(gate), cmat(x), mat(out), x.rows, x.cols, ctx_->stream());
}

void CudaBackend::softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) {
  check(is_f32(x) && is_f32(bias) && is_f32(scale) && is_f32(out), "softplus_scale types");
  check(bias.cols == x.cols && scale.cols == x.cols && same_shape(x, out), "softplus_scale shapes");
  ctx_->make_current();
  launch_softplus_scale(cmat(x), fp(bias), fp(scale), mat(out), x.rows, x.cols, ctx_->stream());
}

void CudaBackend::l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) {
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "l2_norm shapes");
  check(group > 0 && x.cols % group == 0, "l2_norm group does not divide the row");
  ctx_->make_current();
  launch_l2_norm(fp(x), fstride(x), fp(y), fstride(y), x.rows, x.cols, group, eps, ctx_->stream());
}

void CudaBackend::ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y) {
  const int64_t C = x.cols, n = x.rows, K = w.cols;
  check(is_f32(x) && is_f32(state) && is_f32(w) && is_f32(y), "ssm_conv types must be f32");
  check(K >= 2 && K <= kSsmConvMaxKernel && w.rows == C && state.cols == C && state.rows == K - 1 && y.cols == C &&
            y.rows == n,
        "ssm_conv shapes");
  check(y.data != x.data, "ssm_conv output must not alias its input");
  check(state.stride == static_cast<size_t>(C) * sizeof(float) && w.stride == static_cast<size_t>(K) * sizeof(float),
        "ssm_conv state and weights must be dense");
  ctx_->make_current();
  launch_ssm_conv(fp(x), fstride(x), fp(state), fp(w), fp(y), fstride(y), n, C, static_cast<int>(K), nullptr, 0,
                  ctx_->stream());
}

void CudaBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                   const Tensor& beta, const Tensor& state, float scale, const Tensor& out) {
  const int64_t d = state.cols, n = v.rows;
  check(is_f32(q) && is_f32(k) && is_f32(v) && is_f32(g) && is_f32(beta) && is_f32(state) && is_f32(out),
        "gated_delta_rule types must be f32");
  check(d > 0 && v.cols % d == 0 && q.cols % d == 0 && k.cols == q.cols, "gated_delta_rule head sizes");
  const int64_t Hv = v.cols / d, Hk = q.cols / d;
  check(Hk > 0 && Hv % Hk == 0, "gated_delta_rule: value heads must be a multiple of key heads");
  check(q.rows == n && k.rows == n && g.rows == n && beta.rows == n && out.rows == n, "gated_delta_rule rows");
  check(g.cols == Hv && beta.cols == Hv && out.cols == Hv * d && state.rows == Hv * d, "gated_delta_rule shapes");
  check(state.stride == static_cast<size_t>(d) * sizeof(float), "gated_delta_rule state must be dense");
  check(delta_rule_head_size_supported(static_cast<int32_t>(d)), "gated_delta_rule head size must be 32, 64, 128 or 256");
  ctx_->make_current();
  DeltaRuleArgs a;
  a.q = fp(q), a.q_stride = fstride(q);
  a.k = fp(k), a.k_stride = fstride(k);
  a.v = fp(v), a.v_stride = fstride(v);
  a.g = fp(g), a.g_stride = fstride(g);
  a.beta = fp(beta), a.beta_stride = fstride(beta);
  a.state = fp(state);
  a.out = fp(out), a.out_stride = fstride(out);
  a.n = n;
  a.d = static_cast<int32_t>(d);
  a.n_k_heads = static_cast<int32_t>(Hk);
  a.n_v_heads = static_cast<int32_t>(Hv);
  a.scale = scale;
  launch_gated_delta_rule(a, ctx_->stream());
}

void CudaBackend::argmax(const Tensor& logits, const Tensor& out) {
  check(is_f32(logits) && out.type == GgmlType::I32 && out.rows == logits.rows && out.stride == sizeof(int32_t),
        "argmax shapes");
  ctx_->make_current();
  launch_argmax(fp(logits), fstride(logits), logits.rows, logits.cols, static_cast<int32_t*>(out.data), ctx_->stream());
}

// ---- graphs ----

std::unique_ptr<OpGraph> CudaBackend::record(const std::function<void()>& ops) {
  ctx_->make_current();
  cuda_check(cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  cudaGraph_t graph = nullptr;
  try {
    ops();
  } catch (...) {
    cudaStreamEndCapture(ctx_->stream(), &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  cuda_check(cudaStreamEndCapture(ctx_->stream(), &graph), "cudaStreamEndCapture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  cuda_check(e, "cudaGraphInstantiate");
  return std::make_unique<CudaGraph>(exec);
}

void CudaBackend::replay(OpGraph& g) {
  ctx_->make_current();
  cuda_check(cudaGraphLaunch(static_cast<CudaGraph&>(g).exec, ctx_->stream()), "cudaGraphLaunch");
}

// ---- bandwidth ----

double CudaBackend::measure_read_bandwidth(size_t bytes, int reps) {
  ctx_->make_current();
  bytes = bytes / 16 * 16;
  void* data = nullptr;
  float* sink = nullptr;
  cuda_check(cudaMalloc(&data, bytes), "cudaMalloc(bandwidth buffer)");
  cuda_check(cudaMalloc(&sink, static_cast<size_t>(read_bw_blocks()) * sizeof(float)), "cudaMalloc(sink)");
  cuda_check(cudaMemsetAsync(data, 0x5a, bytes, ctx_->stream()), "cudaMemset");
  cudaEvent_t e0, e1;
  cuda_check(cudaEventCreate(&e0), "cudaEventCreate");
  cuda_check(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < reps + 2; ++r) {
    cuda_check(cudaEventRecord(e0, ctx_->stream()), "cudaEventRecord");
    launch_read_bw(data, bytes, sink, ctx_->stream());
    cuda_check(cudaEventRecord(e1, ctx_->stream()), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(e1), "cudaEventSynchronize");
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    if (r >= 2) ms.push_back(t);  // two warm-up passes
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(data);
  cudaFree(sink);
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  return static_cast<double>(bytes) / (med * 1e-3);
}

}  // namespace df::cuda
