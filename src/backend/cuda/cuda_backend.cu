#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "backend/backend_factory.h"
#include "backend/range_reader.h"

#include "backend/cuda/backend_check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_options.h"
#include "backend/cuda/expert_cache.h"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/packed_weights.h"
#include "backend/cuda/ops/argmax.cuh"
#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/delta_rule_chunked.cuh"
#include "backend/cuda/ops/delta_rule_chunked_tc.cuh"
#include "backend/cuda/ops/elementwise.cuh"
#include "backend/cuda/ops/flash_prefill.cuh"
#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/matvec/pack_row.cuh"
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

}  // namespace

// "q8_0 4096x2560": a packed weight's type and shape (rows x cols), for the op profile.
std::string weight_shape(const cudamv::PackedWeight& P) {
  return std::string(type_name(P.type)) + " " + std::to_string(P.rows) + "x" + std::to_string(P.cols);
}

namespace {

}  // namespace

int probe_devices(std::string* why) {
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
  const int n = probe_devices(&why);
  if (n == 0) throw Error("cuda: no usable GPU (" + why + ")");
  if (opt.device < 0 || opt.device >= n)
    throw Error("cuda: device " + std::to_string(opt.device) + " does not exist (" + std::to_string(n) + " found)");
  ctx_ = std::make_unique<CudaContext>(opt.device);
  weights_ = std::make_unique<PackedWeights>(opt.int8_x, opt.pdl, opt.mv_pipe, opt.mv_pipe_rows);
  weights_->tables.set_l2_prefetch(opt.l2_prefetch_bytes, opt.mv_blocks_per_sm);
  weights_->tables.set_short_pipe(opt.mv_short_pipe);
  weights_->tables.set_stage_x(opt.mv_stage_x);
  weights_->tables.set_cluster(opt.mv_cluster);
  weights_->tables.set_preround(opt.mv_preround);
  fuse_ = opt.fuse;
  lean_ = opt.lean_kernels;
  attn_v1_ = opt.attn_v1;
  fuse_qk_attn_ = opt.fuse_qk_attention;
  fuse_attn_gate_ = opt.fuse_attn_gate;
  attn_wide_ = opt.attn_wide;
  prefill_sgemm_ = opt.prefill_sgemm;
  gemm_min_rows_ = std::max<int64_t>(cudamv::kMaxRows, opt.gemm_min_rows);
  fuse_deltanet_ = opt.fuse_deltanet;
  small_pdl_ = opt.pdl && opt.lean_kernels;
  moe_ = std::make_unique<MoeBuffers>();
  opt_ = opt;
  streamed_ = opt.expert_cache_bytes > 0;
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  free_at_start_ = free_b;
  if (opt.gpu_mem_bytes < 0) throw Error("cuda: --gpu-mem must not be negative");
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(ctx_->device());  // no throw here: at exit the runtime may be gone already
  prof_.reset();
  experts_.reset();
  moe_.reset();
  weights_.reset();
}

std::string CudaBackend::name() const {
  return "cuda (" + std::string(ctx_->props().name) + ", device " + std::to_string(ctx_->device()) + ")";
}

std::string CudaBackend::device_name() const { return ctx_->props().name; }
uint64_t CudaBackend::device_memory() const { return ctx_->props().totalGlobalMem; }

std::shared_ptr<Buffer> CudaBackend::alloc(size_t bytes) {
  check(!ctx_->capturing(), "alloc while a graph is captured");
  ++i32_epoch_;  // fresh (zeroed) memory may reuse the address of freed ids
  return std::make_shared<DeviceBuffer>(*ctx_, bytes);
}

void CudaBackend::reserve_weights(uint64_t bytes) {
  ctx_->make_current();
  if (opt_.expert_cache_bytes < 0) {  // auto: stream the experts when the weights do not fit
    size_t free_b = 0, total_b = 0;
    cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    const uint64_t budget = opt_.gpu_mem_bytes > 0 ? std::min<uint64_t>(free_b, static_cast<uint64_t>(opt_.gpu_mem_bytes)) : free_b;
    streamed_ = bytes + (1ull << 30) > budget;
  }
  // Streamed experts: the dense weights get their own allocations (the file's size would
  // reserve the experts too).
  if (!streamed_) ctx_->reserve_weights(bytes);
}

void CudaBackend::weight_file(const std::string& path, const void* base, uint64_t size) {
  weight_files_.push_back(WeightFile{path, static_cast<const uint8_t*>(base), size, nullptr});
}

bool CudaBackend::prefault_weights() const { return !(experts_ && experts_->from_file()); }

// ExpertSource::automatic: the file tier when the model files (an upper bound on the packed
// experts' bytes, which the host tier pins) plus max(4 GiB, 1/10 of the RAM) exceed what
// the kernel reports available.
bool CudaBackend::experts_from_file() const {
  if (opt_.expert_source != ExpertSource::automatic) return opt_.expert_source == ExpertSource::file;
  uint64_t files = 0;
  for (const WeightFile& f : weight_files_) files += f.size;
  if (files == 0) return false;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0, total = 0, avail = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") total = kb << 10;
    if (key == "MemAvailable:") avail = kb << 10;
    in.ignore(64, '\n');
  }
  if (avail == 0) return false;
  return files + std::max<uint64_t>(4ull << 30, total / 10) > avail;
}

Tensor CudaBackend::weight_slots(const Tensor& W, int64_t rows, const void* host_rows,
                                 std::vector<std::shared_ptr<Buffer>>& owner) {
  (void)owner;  // weight memory, kept for the backend's lifetime like every weight
  return weight(W.type, W.cols, rows, host_rows);  // copies or packs the bytes now (F32: its dense form)
}

void CudaBackend::weight_set_row(const Tensor& S, int64_t row, const void* host_row) {
  check(!ctx_->capturing(), "weight_set_row while a graph is captured");
  check(row >= 0 && row < S.rows, "weight_set_row: the row is outside the weight");
  ctx_->make_current();
  if (S.type == GgmlType::F32) {  // dense as in the file (weight())
    cuda_check(cudaMemcpyAsync(static_cast<uint8_t*>(S.data) + S.stride * static_cast<size_t>(row), host_row, S.stride,
                               cudaMemcpyHostToDevice, ctx_->stream()),
               "weight_set_row");
    cuda_check(cudaStreamSynchronize(ctx_->stream()), "weight_set_row");
    return;
  }
  const auto it = weights_->by_data.find(S.data);
  check(it != weights_->by_data.end() && it->second.rows == S.rows && it->second.cols == S.cols,
        "weight_set_row: the weight was not made by weight_slots");
  cudamv::pack_row(it->second, row, host_row, ctx_->stream());
}

Tensor CudaBackend::weight_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host) {
  if (!streamed_) {
    const Tensor t = weight(type, cols, rows * n_expert, host);
    weights_->expert_tables.emplace(t.data, make_expert_table(packed(t), n_expert, rows));
    return t;
  }
  check(!ctx_->capturing(), "weight upload while a graph is captured");
  if (!cudamv::supported(type))
    throw Error("cuda: weights of type " + std::string(type_name(type)) + " are not supported on the GPU");
  if (!experts_)
    experts_ = std::make_unique<ExpertCache>(
        *ctx_, static_cast<uint64_t>(std::max<int64_t>(opt_.expert_cache_bytes, 0)),
        opt_.gpu_mem_bytes > 0 ? 512ull << 20 : 1ull << 30, static_cast<uint64_t>(opt_.gpu_mem_bytes), free_at_start_,
        experts_from_file());
  // File tier: the stack's offset in the file its host pointer maps (read with O_DIRECT).
  const RangeReader* reader = nullptr;
  uint64_t offset = 0;
  if (experts_->from_file()) {
    const auto* p = static_cast<const uint8_t*>(host);
    for (WeightFile& f : weight_files_)
      if (p >= f.base && p < f.base + f.size) {
        if (!f.reader) f.reader = std::make_shared<RangeReader>(f.path, true);
        reader = f.reader.get();
        offset = static_cast<uint64_t>(p - f.base);
      }
  }
  const ExpertStack* s = experts_->add_stack(type, cols, rows, n_expert, host, reader, offset);
  ensure_iota(rows);
  Tensor t;
  t.type = type;
  t.cols = cols;
  t.rows = rows * n_expert;
  t.stride = row_bytes(type, cols);
  t.data = const_cast<ExpertStack*>(s);  // a key for matmul_id only: host memory, never read as device data
  return t;
}

Tensor CudaBackend::weight(GgmlType type, int64_t cols, int64_t rows, const void* host) {
  check(!ctx_->capturing(), "weight upload while a graph is captured");
  ctx_->make_current();
  Tensor t;
  t.type = type;
  t.cols = cols;
  t.rows = rows;
  t.stride = row_bytes(type, cols);  // the file's bytes (what a decode step reads)
  if (type == GgmlType::F32) {
    // Dense as in the file: norms, convolution weights and gates read it directly. Rows of a
    // multiple of 8 floats are also matvec/'s raw f32 layout, so matmul uses it in place.
    t.data = ctx_->weight_memory(t.nbytes());
    cuda_check(cudaMemcpy(t.data, host, t.nbytes(), cudaMemcpyHostToDevice), "upload of a weight");
    if (cols % 8 == 0) {
      cudamv::PackedWeight p;
      p.type = type, p.cols = cols, p.rows = rows;
      p.data = static_cast<uint8_t*>(t.data);
      p.bytes = t.nbytes();
      p.q_row_bytes = t.stride;
      p.m_offset = t.nbytes();
      p.m_row_bytes = 0;
      p.tables = weights_->tables.tables();
      weights_->by_data.emplace(t.data, std::move(p));
    }
  } else {
    if (!cudamv::supported(type))
      throw Error("cuda: weights of type " + std::string(type_name(type)) + " are not supported on the GPU");
    const size_t bytes = cudamv::packed_bytes(type, cols, rows);
    void* dst = ctx_->weight_memory(bytes);
    weights_->by_data.emplace(dst, cudamv::pack_weight(weights_->tables, type, cols, rows, host, dst, ctx_->stream()));
    t.data = dst;
  }
  ensure_iota(rows);
  return t;
}

void CudaBackend::ensure_iota(int64_t rows) {
  if (rows > weights_->iota_n) {  // row ids for dequantizing tiles of a weight
    if (weights_->iota) cuda_check(cudaFree(weights_->iota), "cudaFree(iota)");
    weights_->iota = nullptr;
    cuda_check(cudaMalloc(&weights_->iota, static_cast<size_t>(rows) * sizeof(int32_t)), "cudaMalloc(iota)");
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    cuda_check(cudaMemcpy(weights_->iota, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice),
               "upload of row ids");
    weights_->iota_n = rows;
  }
}

const cudamv::PackedWeight& CudaBackend::packed(const Tensor& W) const {
  const auto it = weights_->by_data.find(W.data);
  if (it == weights_->by_data.end() || it->second.rows != W.rows || it->second.cols != W.cols)
    throw Error("cuda backend: matmul's matrix must be a weight from weight() (an f32 one: rows of a multiple of 8)");
  return it->second;
}

const cudamv::PackedWeight* CudaBackend::find_packed(const Tensor& W) const {
  const auto it = weights_->by_data.find(W.data);
  if (it == weights_->by_data.end() || it->second.rows != W.rows || it->second.cols != W.cols) return nullptr;
  return &it->second;
}

// ---- ops ----

namespace {
bool dense(const Tensor& t) { return t.stride == row_bytes(t.type, t.cols); }
void check_pos(const Tensor& pos, int64_t rows, const char* op) {
  if (pos.type != GgmlType::I32 || pos.cols != 1 || pos.rows != rows || pos.stride != sizeof(int32_t))
    throw Error(std::string("cuda backend: ") + op + ": pos must be a dense I32 [n, 1] tensor of the rows");
}
}  // namespace

void CudaBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) {
  OpScope ps(prof_.get(), "get_rows");
  check(ids.type == GgmlType::I32 && ids.cols == 1 && ids.stride == sizeof(int32_t), "get_rows ids must be I32 [n, 1]");
  check(is_f32(out) && out.cols == table.cols && out.rows >= ids.rows, "get_rows shapes");
  check(!experts_ || !experts_->find(table.data), "get_rows of streamed experts (matmul_id only)");
  ctx_->make_current();
  const auto* id = static_cast<const int32_t*>(ids.data);
  const auto it = weights_->by_data.find(table.data);
  if (it != weights_->by_data.end() && table.type != GgmlType::F32) {
    check(dense(out), "get_rows of a weight table needs a dense output");
    cudamv::get_rows(it->second, id, static_cast<int>(ids.rows), fp(out), ctx_->stream());
    return;
  }
  check(is_f32(table), "get_rows of a quantized tensor that is not a weight");
  launch_gather_rows_f32(fp(table), fstride(table), table.rows, table.cols, id, ids.rows, fp(out), fstride(out),
                         ctx_->stream());
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) {
  OpScope ps(prof_.get(), "rms_norm");
  check(is_f32(x) && is_f32(w) && is_f32(y), "rms_norm types must be f32");
  check(x.cols == w.cols && same_shape(x, y), "rms_norm shapes");
  ctx_->make_current();
  launch_rms_norm(fp(x), fstride(x), fp(w), eps, fp(y), fstride(y), x.rows, x.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::matmul(const Tensor& W, const Tensor& x, const Tensor& y) {
  check(is_f32(x) && is_f32(y), "matmul activations must be f32");
  check(W.cols == x.cols && y.cols == W.rows && y.rows == x.rows, "matmul shapes");
  ctx_->make_current();
  const cudamv::PackedWeight& P = packed(W);
  OpScope ps(prof_.get(), "matmul", P.bytes, [&] { return weight_shape(P); });
  if (x.rows <= cudamv::kMaxRows) {
    matvec_rows(P, x, y);
    return;
  }
  mul_packed(P, fp(x), fstride(x), x.rows, fp(y), fstride(y));
}

void CudaBackend::mul_packed(const cudamv::PackedWeight& P, const float* x, int64_t x_stride, int64_t n, float* y,
                             int64_t y_stride) {
  const int64_t k = P.cols, m = P.rows;
  if (n <= cudamv::kMaxRows && x_stride == k && y_stride == m) {
    cudamv::matvec(P, x, y, static_cast<int>(n), ctx_->stream());
    return;
  }
  // Up to gemm_min_rows rows: the matvec, up to 8 rows a launch (strided rows one at a time).
  const bool x_aligned = x_stride % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0;
  if (n <= gemm_min_rows_ && ((x_stride == k && y_stride == m) || x_aligned)) {
    const bool dense_rows = x_stride == k && y_stride == m;
    for (int64_t r0 = 0; r0 < n;) {
      const int64_t c = dense_rows ? std::min<int64_t>(cudamv::kMaxRows, n - r0) : 1;
      cudamv::matvec(P, x + r0 * x_stride, y + r0 * y_stride, static_cast<int>(c), ctx_->stream());
      r0 += c;
    }
    return;
  }
  // F32 weights (a MoE router, the shared expert's gate, float models): FP32 cuBLAS on x as it is
  // rather than the tiles' f16 rounding of both operands (an f32 weight past 65504 would not even
  // fit f16). Speed measured the same on the 35B-A3B shape's prefill (H200, stop 25).
  if (prefill_sgemm_ && n > cudamv::kMaxRows && P.type == GgmlType::F32 && P.q_row_bytes % sizeof(float) == 0 &&
      weights_->gemm_tiles.sgemm(reinterpret_cast<const float*>(P.data),
                                 static_cast<int64_t>(P.q_row_bytes / sizeof(float)), m, k, x, x_stride, n, y, y_stride,
                                 ctx_->stream(), ctx_->capturing()))
    return;
  if (n > cudamv::kMaxRows && gemm::supported(P) && x_aligned) {
    auto* xh = static_cast<uint16_t*>(ctx_->scratch(static_cast<size_t>(n * k) * sizeof(uint16_t)));
    gemm::convert_x_f16(x, x_stride, n, k, xh, ctx_->stream());
    weights_->gemm_tiles.gemm(P, xh, n, y, y_stride, ctx_->stream(), ctx_->capturing());
    return;
  }
  // More rows: dequantize tiles of R weight rows (bounded scratch, never the whole matrix)
  // and multiply each with every row of x.
  check(k % 32 == 0, "matmul of more than 8 rows: row length must be a multiple of 32");
  const int64_t R = std::max<int64_t>(64, std::min<int64_t>(m, (int64_t{32} << 20) / (k * 4) / 64 * 64));
  float* tile = static_cast<float*>(ctx_->scratch(static_cast<size_t>(R * k) * sizeof(float)));
  for (int64_t r0 = 0; r0 < m; r0 += R) {
    const int64_t nr = std::min(R, m - r0);
    cudamv::get_rows(P, weights_->iota + r0, static_cast<int>(nr), tile, ctx_->stream());
    launch_matmul_f32_tiled(tile, k, nr, k, x, x_stride, n, y + r0, y_stride, ctx_->stream());
  }
}

void CudaBackend::matvec_rows(const cudamv::PackedWeight& W, const Tensor& x, const Tensor& y) {
  if (dense(x) && dense(y)) {
    cudamv::matvec(W, fp(x), fp(y), static_cast<int>(x.rows), ctx_->stream());
    return;
  }
  // Strided rows: one row at a time (matvec/ gives every row the same bits for any n).
  for (int64_t r = 0; r < x.rows; ++r)
    cudamv::matvec(W, fp(x.slice_rows(r, 1)), fp(y.slice_rows(r, 1)), 1, ctx_->stream());
}

void CudaBackend::rope(const Tensor& x, const Tensor& pos, const RopeParams& p) {
  OpScope ps(prof_.get(), "rope");
  check(is_f32(x) && x.cols == static_cast<int64_t>(p.n_head) * p.head_dim && p.n_rot <= p.head_dim &&
            p.n_rot % 2 == 0 && p.n_rot > 0,
        "rope shapes");
  check_pos(pos, x.rows, "rope");
  ctx_->make_current();
  RopeArgs a;
  a.n_head = p.n_head;
  a.head_dim = p.head_dim;
  a.n_rot = p.n_rot;
  a.theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));  // as the CPU backend
  for (int i = 0; i < 4; ++i) a.sections[i] = p.sections[i];
  launch_rope_neox(fp(x), fstride(x), x.rows, a, static_cast<const int32_t*>(pos.data), 0, ctx_->stream());
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

void CudaBackend::kv_store(KvCache& c, const Tensor& k, const Tensor& v, const Tensor& pos) {
  OpScope ps(prof_.get(), "kv_store");
  check(is_f32(k) && is_f32(v) && k.cols == c.kv_dim && v.cols == c.kv_dim && k.rows == v.rows, "kv_store shapes");
  check_pos(pos, k.rows, "kv_store");
  ctx_->make_current();
  launch_kv_store(fp(k), fstride(k), fp(v), fstride(v), k.rows, c.kv_dim, static_cast<__half*>(c.k.data),
                  static_cast<__half*>(c.v.data), static_cast<const int32_t*>(pos.data), 0, ctx_->stream());
}

void CudaBackend::attention(const Tensor& q, const KvCache& c, const Tensor& pos, const AttentionParams& p,
                            const Tensor& out) {
  OpScope ps(prof_.get(), "attention");
  check(is_f32(q) && is_f32(out), "attention q/out must be f32");
  check(q.cols == static_cast<int64_t>(p.n_head) * p.head_dim && out.cols == q.cols && out.rows == q.rows,
        "attention q/out shapes");
  check(p.n_head_kv > 0 && c.kv_dim == static_cast<int64_t>(p.n_head_kv) * p.head_dim && p.n_head % p.n_head_kv == 0,
        "attention head counts");
  check(c.type == GgmlType::F16, "attention needs an F16 cache");
  check(attention_head_dim_supported(p.head_dim), "attention head_dim must be 32, 64, 128 or 256");
  check_pos(pos, q.rows, "attention");
  ctx_->make_current();
  AttnArgs a;
  a.n_head = p.n_head;
  a.n_head_kv = p.n_head_kv;
  a.head_dim = p.head_dim;
  a.scale = p.scale;
  a.n_ctx = c.n_ctx;
  if (q.rows > gemm::kMinRows && flash_prefill_supported(p.head_dim) && fstride(q) % 4 == 0 && fstride(out) % 2 == 0 &&
      (reinterpret_cast<uintptr_t>(q.data) & 15u) == 0 && (reinterpret_cast<uintptr_t>(out.data) & 7u) == 0) {
    launch_flash_prefill(fp(q), fstride(q), q.rows, static_cast<const __half*>(c.k.data),
                         static_cast<const __half*>(c.v.data), c.kv_dim, static_cast<const int32_t*>(pos.data), a,
                         fp(out), fstride(out), ctx_->stream());
    return;
  }
  float* scratch = static_cast<float*>(ctx_->scratch(attention_scratch_floats(q.rows, a) * sizeof(float) + 16));
  int32_t* counters = lean_ ? ctx_->counters(static_cast<size_t>(attention_counters(q.rows, a))) : nullptr;
  launch_attention(fp(q), fstride(q), q.rows, static_cast<const __half*>(c.k.data),
                   static_cast<const __half*>(c.v.data), c.kv_dim, static_cast<const int32_t*>(pos.data), 0, a,
                   scratch, fp(out), fstride(out), ctx_->stream(), counters, small_pdl_, attn_v1_, attn_wide_);
}

void CudaBackend::argmax(const Tensor& logits, const Tensor& out) { argmax_ids(logits, Tensor{}, out); }

void CudaBackend::argmax_ids(const Tensor& logits, const Tensor& ids, const Tensor& out) {
  OpScope ps(prof_.get(), "argmax");
  check(is_f32(logits) && out.type == GgmlType::I32 && out.rows == logits.rows && out.stride == sizeof(int32_t),
        "argmax shapes");
  check(ids.empty() || (ids.type == GgmlType::I32 && ids.rows == logits.cols && ids.stride == sizeof(int32_t)),
        "argmax_ids: ids must be i32 [logits' columns, 1]");
  const auto* map = static_cast<const int32_t*>(ids.data);
  ctx_->make_current();
  ++i32_epoch_;
  if (lean_) {
    void* part = ctx_->scratch(argmax_partial_bytes(logits.rows, logits.cols));
    int32_t* counters = ctx_->counters(static_cast<size_t>(argmax_counters(logits.rows)));
    launch_argmax_split(fp(logits), fstride(logits), logits.rows, logits.cols, static_cast<int32_t*>(out.data), part,
                        counters, ctx_->stream(), small_pdl_, map);
    return;
  }
  launch_argmax(fp(logits), fstride(logits), logits.rows, logits.cols, static_cast<int32_t*>(out.data), ctx_->stream(),
                map);
}

void CudaBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  OpScope ps(prof_.get(), "swiglu");
  check(is_f32(gate) && is_f32(up) && is_f32(out) && same_shape(gate, up) && same_shape(gate, out), "swiglu shapes");
  ctx_->make_current();
  launch_swiglu(cmat(gate), cmat(up), mat(out), gate.rows, gate.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::add(const Tensor& x, const Tensor& y) {
  OpScope ps(prof_.get(), "add");
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "add shapes");
  ctx_->make_current();
  launch_add(mat(x), cmat(y), x.rows, x.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::unary(UnaryOp op, const Tensor& x, const Tensor& y) {
  OpScope ps(prof_.get(), op == UnaryOp::SILU ? "silu" : op == UnaryOp::SIGMOID ? "sigmoid" : "softplus");
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "unary shapes");
  ctx_->make_current();
  const Unary u = op == UnaryOp::SILU ? Unary::SILU : op == UnaryOp::SIGMOID ? Unary::SIGMOID : Unary::SOFTPLUS;
  launch_unary(u, cmat(x), mat(y), x.rows, x.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) {
  OpScope ps(prof_.get(), "sigmoid_mul");
  check(is_f32(gate) && is_f32(x) && is_f32(out) && same_shape(gate, x) && same_shape(x, out), "sigmoid_mul shapes");
  ctx_->make_current();
  launch_sigmoid_mul(cmat(gate), cmat(x), mat(out), x.rows, x.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) {
  OpScope ps(prof_.get(), "softplus_scale");
  check(is_f32(x) && is_f32(bias) && is_f32(scale) && is_f32(out), "softplus_scale types");
  check(bias.cols == x.cols && scale.cols == x.cols && same_shape(x, out), "softplus_scale shapes");
  ctx_->make_current();
  launch_softplus_scale(cmat(x), fp(bias), fp(scale), mat(out), x.rows, x.cols, ctx_->stream(), small_pdl_);
}

void CudaBackend::l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) {
  OpScope ps(prof_.get(), "l2_norm");
  check(is_f32(x) && is_f32(y) && same_shape(x, y), "l2_norm shapes");
  check(group > 0 && x.cols % group == 0, "l2_norm group does not divide the row");
  ctx_->make_current();
  launch_l2_norm(fp(x), fstride(x), fp(y), fstride(y), x.rows, x.cols, group, eps, ctx_->stream(), small_pdl_);
}

void CudaBackend::ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                           const Tensor& snapshots) {
  OpScope ps(prof_.get(), "ssm_conv");
  const int64_t C = x.cols, n = x.rows, K = w.cols;
  check(is_f32(x) && is_f32(state) && is_f32(w) && is_f32(y), "ssm_conv types must be f32");
  check(K >= 2 && K <= kSsmConvMaxKernel && w.rows == C && state.cols == C && state.rows == K - 1 && y.cols == C &&
            y.rows == n,
        "ssm_conv shapes");
  check(y.data != x.data, "ssm_conv output must not alias its input");
  check(state.stride == static_cast<size_t>(C) * sizeof(float) && w.stride == static_cast<size_t>(K) * sizeof(float),
        "ssm_conv state and weights must be dense");
  int64_t n_snap = 0;
  if (!snapshots.empty()) {
    check(is_f32(snapshots) && snapshots.cols == C && snapshots.rows % (K - 1) == 0 && dense(snapshots),
          "ssm_conv snapshots must be dense f32 [m * (K-1), C]");
    n_snap = std::min(n, snapshots.rows / (K - 1));
  }
  ctx_->make_current();
  launch_ssm_conv(fp(x), fstride(x), fp(state), fp(w), fp(y), fstride(y), n, C, static_cast<int>(K),
                  n_snap ? fp(snapshots) : nullptr, n_snap, ctx_->stream(), small_pdl_, opt_.gdn_prefill != 0);
}

void CudaBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                   const Tensor& beta, const Tensor& state, float scale, const Tensor& out,
                                   const Tensor& snapshots) {
  OpScope ps(prof_.get(), "gated_delta_rule");
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
  int64_t n_snap = 0;
  if (!snapshots.empty()) {
    check(is_f32(snapshots) && snapshots.cols == d && snapshots.rows % (Hv * d) == 0 && dense(snapshots),
          "gated_delta_rule snapshots must be dense f32 [m * Hv * d, d]");
    n_snap = std::min(n, snapshots.rows / (Hv * d));
  }
  ctx_->make_current();
  DeltaRuleArgs a;
  a.q = fp(q), a.q_stride = fstride(q);
  a.k = fp(k), a.k_stride = fstride(k);
  a.v = fp(v), a.v_stride = fstride(v);
  a.g = fp(g), a.g_stride = fstride(g);
  a.beta = fp(beta), a.beta_stride = fstride(beta);
  a.state = fp(state);
  a.out = fp(out), a.out_stride = fstride(out);
  a.snapshots = n_snap ? fp(snapshots) : nullptr;
  a.n_snapshots = n_snap;
  a.n = n;
  a.d = static_cast<int32_t>(d);
  a.n_k_heads = static_cast<int32_t>(Hk);
  a.n_v_heads = static_cast<int32_t>(Hv);
  a.scale = scale;
  a.pdl = small_pdl_;
  // Prefill (more than 16 rows, no snapshots) by the chunked kernels with CudaOptions::gdn_prefill:
  // the f32 chunked kernel measured slower than the token kernel on the H200 (0.95 vs 0.26 ms,
  // 48 heads of 128, 512 tokens: bench_prefill_cuda) and stays for comparison ("v1"); the
  // tensor-core one (ops/delta_rule_chunked_tc.cuh) needs scratch, so not inside a capture.
  // Decode, verify and short rows keep the token kernel (its bits: a row's result does not
  // depend on the row count up to 16).
  const bool prefill = n > 16 && n_snap == 0;
  if (prefill && opt_.gdn_prefill == 1 && delta_rule_chunked_supported(a.d)) {
    launch_gated_delta_rule_chunked(a, ctx_->stream());
    return;
  }
  if (prefill && opt_.gdn_prefill >= 2 && delta_rule_chunked_tc_supported(a) && !ctx_->capturing()) {
    void* scratch = ctx_->scratch(delta_rule_chunked_tc_scratch_bytes(n, a.n_v_heads, a.d));
    launch_gated_delta_rule_chunked_tc(a, scratch, opt_.gdn_prefill == 3, 0, ctx_->stream());
    return;
  }
  launch_gated_delta_rule(a, ctx_->stream());
}

// ---- graphs ----

std::unique_ptr<OpGraph> CudaBackend::record(const std::function<void()>& ops) {
  ctx_->make_current();
  if (prof_ || (experts_ && experts_->from_file())) {  // profiling: every step op by op; the file
    ops();                                             // tier syncs at every MoE layer
    return nullptr;
  }
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
  auto g = std::make_unique<CudaGraph>(exec);
  replay(*g);  // the recorded ops have not run yet: run them now
  return g;
}

void CudaBackend::replay(OpGraph& g) {
  ctx_->make_current();
  if (experts_) experts_->maintain();  // the expert placement moves between steps
  cuda_check(cudaGraphLaunch(static_cast<CudaGraph&>(g).exec, ctx_->stream()), "cudaGraphLaunch");
}

// ---- per-op profile ----

void CudaBackend::set_profiling(bool on) {
  ctx_->make_current();
  if (on && !prof_) prof_ = std::make_unique<OpProfiler>(ctx_->stream());
  if (!on) prof_.reset();
}

void CudaBackend::profile_step_begin() {
  check(prof_ != nullptr, "profile_step_begin without set_profiling(true)");
  ctx_->make_current();
  prof_->step_begin();
}

void CudaBackend::profile_step_end() {
  check(prof_ != nullptr, "profile_step_end without set_profiling(true)");
  ctx_->make_current();
  prof_->step_end();
}

OpProfile CudaBackend::take_profile() { return prof_ ? prof_->take() : OpProfile{}; }

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

// ---- the factory's entry points (backend_factory.h) ----

int device_count() { return probe_devices(nullptr); }

std::unique_ptr<Backend> make_backend(const BackendOptions& opt) {
  return std::make_unique<CudaBackend>(cuda_options(opt));
}

}  // namespace df::cuda
