#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <sys/mman.h>

#include "backend/cpu/exp_math.h"
#include "common/error.h"
#include "quant/cpu/repack.h"

namespace df::cpu {

size_t available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    f.ignore(256, '\n');
  }
  return 0;
}

namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : size_(bytes) {
    // 64-byte aligned for SIMD loads; zeroed so fresh caches hold no garbage. Buffers of
    // 2 MiB and more (repacked weights, caches) are 2 MiB aligned and advised to transparent
    // huge pages before the first touch: streaming a repacked matrix per decoded token then
    // walks 512x fewer page-table entries (measured, one thread reading 256 MiB: 26 -> 31
    // GB/s). Where THP is off the advice is a no-op.
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t align = bytes >= kHuge ? kHuge : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    data_ = std::aligned_alloc(align, rounded == 0 ? 64 : rounded);
    if (!data_) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
    if (align == kHuge) ::madvise(data_, rounded, MADV_HUGEPAGE);
    std::memset(data_, 0, rounded == 0 ? 64 : rounded);
  }
  ~HostBuffer() override { std::free(data_); }
  void* data() override { return data_; }
  size_t size() const override { return size_; }

 private:
  void* data_;
  size_t size_;
};

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cpu backend: ") + what);
}

float* frow(const Tensor& t, int64_t r) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(t.data) + t.stride * static_cast<size_t>(r));
}

int32_t irow(const Tensor& t, int64_t r) {
  return *reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(t.data) + t.stride * static_cast<size_t>(r));
}

int resolve_threads(int n) {
  if (n > 0) return n;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace

CpuBackend::CpuBackend(const CpuOptions& opt)
    : kernels_(kernels(opt.isa)),
      repack_(opt.repack),
      repack_q8_0_(opt.repack_q8_0),
      expert_stats_on_(opt.expert_stats),
      expert_prefetch_on_(opt.expert_prefetch),
      expert_forecast_on_(opt.expert_forecast),
      expert_draft_forecast_on_(opt.expert_draft_forecast),
      expert_draft_forecast_blocks_(opt.expert_draft_forecast_blocks),
      ssm_(ssm_vec(opt.isa)),
      exact_rows_opt_(opt.exact_rows),
      exact_rows_(opt.exact_rows),
      pool_(resolve_threads(opt.threads)),
      thread_buf_(static_cast<size_t>(pool_.size())),
      thread_bytes_(static_cast<size_t>(pool_.size())) {}

std::string CpuBackend::name() const {
  return "cpu (" + std::string(isa_name(kernels_.isa)) + ", " + std::to_string(pool_.size()) +
         " threads)";
}

std::shared_ptr<Buffer> CpuBackend::alloc(size_t bytes) { return std::make_shared<HostBuffer>(bytes); }

Tensor CpuBackend::weight(GgmlType type, int64_t cols, int64_t rows, const void* host) {
  Tensor t;
  t.data = const_cast<void*>(host);  // weights are read-only views of the mapped file
  t.type = type;
  t.cols = cols;
  t.rows = rows;
  t.stride = row_bytes(type, cols);
  // A copy made for these bytes before belongs to an older load (a backend outlives its models:
  // the bytes may since have been freed and reused by another file) or to another tensor of a
  // corrupt file at the same offset: it is made again for this tensor, never reused.
  repacked_.erase(host);
  make_repacked(t, false);
  return t;
}

void CpuBackend::make_repacked(const Tensor& t, bool stack) {
  const void* host = t.data;
  const GgmlType type = t.type;
  const int64_t cols = t.cols, rows = t.rows;
  if (!repack_ || !host || !repack_supported(kernels_.isa, type, cols)) return;
  // llama.cpp repacks a matrix only when its rows are a multiple of 8 (ggml-cpu repack.cpp,
  // ne[1] % 8): the others (qwen35's 4-row ssm_alpha / ssm_beta) keep the planar vec_dot
  // order there, and so here (measured: repacked, the qwen35moe Q4_K_M reference test's
  // logits were 1.2e-3 from llama.cpp's, over its 1e-3 budget).
  if (rows % 8 != 0) return;
  // Q8_0's layout sums in another order than llama.cpp's (which has no repacked Q8_0 on x86):
  // only with repack_q8_0_ (--cpu-repack all); else its planar rows are copied (huge pages).
  const bool layout = type != GgmlType::Q8_0 || repack_q8_0_;
  // The copies live beside the file's mapped pages: once all copies together would take more
  // than half of the memory there was for them (available now plus copied so far), the other
  // matrices stay on the mapped planar rows (a model near or over the memory's size keeps
  // streaming from its file instead of running out of memory).
  const size_t need = (layout ? cpu::repacked_bytes(type, cols, rows) : 0) +
                      (!layout || repack_min_rows(type) > 1 ? t.stride * static_cast<size_t>(rows) : 0);
  const size_t copied = repacked_bytes(), avail = available_memory();
  if (avail != 0 && copied + need > (avail + copied) / 2) return;
  std::shared_ptr<Buffer> buf;
  if (layout) {  // the repacked copy, written by the pool in groups of rows
    buf = alloc(cpu::repacked_bytes(type, cols, rows));
    const int64_t G = repack_group_rows(type), groups = (rows + G - 1) / G, per_task = 64;
    pool_.parallel_for((groups + per_task - 1) / per_task, [&](int64_t task, int) {
      const int64_t r0 = task * per_task * G, r1 = std::min(rows, r0 + per_task * G);
      repack_rows(type, cols, rows, static_cast<const uint8_t*>(host), t.stride, r0, r1,
                  static_cast<uint8_t*>(buf->data()));
    });
  }
  std::shared_ptr<Buffer> planar;
  if (!layout || repack_min_rows(type) > 1) {
    const size_t bytes = t.stride * static_cast<size_t>(rows), part = size_t{4} << 20;
    planar = alloc(bytes);
    pool_.parallel_for(static_cast<int64_t>((bytes + part - 1) / part), [&](int64_t task, int) {
      const size_t o = part * static_cast<size_t>(task);
      std::memcpy(static_cast<uint8_t*>(planar->data()) + o, static_cast<const uint8_t*>(host) + o,
                  std::min(part, bytes - o));
    });
  }
  repacked_.emplace(host, Repacked{type, cols, rows, t.stride, std::move(buf), std::move(planar), stack});
}

bool CpuBackend::use_repacked(const Repacked* rp, GgmlType t, int64_t n) const {
  // Formats whose repacked kernel does not serve every row count (repack_min_rows > 1) keep
  // the planar row-exact kernels for every call of at most exact_rows_ rows.
  if (!rp || !rp->buf) return false;
  const int64_t min_rows = repack_min_rows(t);
  return n >= min_rows && (min_rows == 1 || n > exact_rows_);
}

Tensor CpuBackend::weight_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host) {
  Tensor t;
  t.data = const_cast<void*>(host);
  t.type = type;
  t.cols = cols;
  t.rows = rows * n_expert;
  t.stride = row_bytes(type, cols);
  repacked_.erase(host);  // as in weight(): never an older load's copy
  // one repacked copy of all the experts' rows when each expert starts a group of rows
  // (matmul_id multiplies expert e through groups e * rows / G ..), as llama.cpp repacks
  // its expert stacks
  if (repack_supported(kernels_.isa, type, cols) && rows % repack_group_rows(type) == 0) make_repacked(t, true);
  if (!repacked(t) && in_mapped_file(host, t.nbytes())) ++expert_stats_.mapped_stacks;
  return t;
}

void CpuBackend::weight_file(const std::string& path, const void* base, uint64_t size) {
  const auto* b = static_cast<const uint8_t*>(base);
  // a mapping of an older load at the same addresses is gone: forget what overlaps
  std::erase_if(mapped_files_, [&](const MappedFile& f) { return f.base < b + size && b < f.base + f.size; });
  mapped_files_.push_back({b, size});
}

bool CpuBackend::prefault_weights() const {
  uint64_t mapped = 0;
  for (const MappedFile& f : mapped_files_) mapped += f.size;
  const size_t avail = available_memory();
  return avail == 0 || mapped <= avail;
}

bool CpuBackend::in_mapped_file(const void* p, size_t bytes) const {
  const auto* a = static_cast<const uint8_t*>(p);
  for (const MappedFile& f : mapped_files_)
    if (a >= f.base && a + bytes <= f.base + f.size) return true;
  return false;
}

const CpuBackend::Repacked* CpuBackend::repacked(const Tensor& W) const {
  if (repacked_.empty()) return nullptr;
  const auto it = repacked_.find(W.data);
  if (it == repacked_.end()) return nullptr;
  const Repacked& r = it->second;
  if (r.type != W.type || r.rows != W.rows || r.cols != W.cols || r.stride != W.stride) return nullptr;
  return &it->second;
}

size_t CpuBackend::repacked_bytes() const {
  size_t b = 0;
  for (const auto& [p, r] : repacked_) b += (r.buf ? r.buf->size() : 0) + (r.planar ? r.planar->size() : 0);
  return b;
}

void CpuBackend::upload(const Tensor& dst, const void* src, size_t bytes) {
  check(bytes <= dst.nbytes(), "upload larger than tensor");
  std::memcpy(dst.data, src, bytes);
}

void CpuBackend::download(const Tensor& src, void* dst, size_t bytes) {
  check(bytes <= src.nbytes(), "download larger than tensor");
  std::memcpy(dst, src.data, bytes);
}

uint8_t* CpuBackend::act_scratch(size_t bytes) {
  if (act_buf_.size() < bytes) act_buf_.resize(bytes);
  return act_buf_.data();
}

float* CpuBackend::thread_scratch(int thread, size_t floats) {
  auto& b = thread_buf_[static_cast<size_t>(thread)];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

uint8_t* CpuBackend::thread_bytes(int thread, size_t bytes) {
  auto& b = thread_bytes_[static_cast<size_t>(thread)];
  if (b.size() < bytes) b.resize(bytes);
  return b.data();
}

void CpuBackend::get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) {
  const int64_t n = ids.rows;
  check(ids.type == GgmlType::I32 && ids.cols == 1, "get_rows ids must be i32 [n, 1]");
  check(out.type == GgmlType::F32 && out.cols == table.cols && out.rows >= n, "get_rows shapes");
  for (int64_t i = 0; i < n; ++i) {
    const int32_t id = irow(ids, i);
    check(id >= 0 && id < table.rows, "get_rows id out of range");
    const uint8_t* src = static_cast<const uint8_t*>(table.data) + table.stride * static_cast<size_t>(id);
    dequantize_row(table.type, src, frow(out, i), table.cols);
  }
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) {
  check(x.cols == w.cols && y.cols == x.cols && y.rows == x.rows, "rms_norm shapes");
  const float* wv = static_cast<const float*>(w.data);
  const int64_t k = x.cols;
  auto one = [&](int64_t r, int) {
    const float* xr = frow(x, r);
    float* yr = frow(y, r);
    double sum = 0.0;  // ggml sums squares in double
    for (int64_t i = 0; i < k; ++i) sum += static_cast<double>(xr[i] * xr[i]);
    const float mean = static_cast<float>(sum / static_cast<double>(k));
    const float scale = 1.0f / std::sqrt(mean + eps);
    for (int64_t i = 0; i < k; ++i) yr[i] = (xr[i] * scale) * wv[i];
  };
  if (x.rows * k < 1 << 15) {
    for (int64_t r = 0; r < x.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::matmul(const Tensor& W, const Tensor& x, const Tensor& y) {
  check(x.type == GgmlType::F32 && y.type == GgmlType::F32, "matmul activations must be f32");
  check(W.cols == x.cols && y.cols == W.rows && y.rows == x.rows, "matmul shapes");
  const int64_t k = W.cols, m = W.rows, n = x.rows;
  const size_t act_stride = act_row_bytes(W.type, k);
  uint8_t* act = act_scratch(act_stride * static_cast<size_t>(n));
  // 1. round the activations to the weight type's dot format (llama.cpp's vec_dot_type)
  auto quant = [&](int64_t r, int) {
    kernels_.quantize_act(W.type, frow(x, r), act + act_stride * static_cast<size_t>(r), k);
  };
  if (n * k < 1 << 14) {  // decode / verify rows: not worth waking the pool
    for (int64_t r = 0; r < n; ++r) quant(r, 0);
  } else {
    pool_.parallel_for(n, quant);
  }
  // 2. split the weight rows into chunks; each task streams its chunk once and multiplies it
  //    with every activation row, in blocks that stay in L2 (row-exact calls: decode-sized
  //    chunks, 2 per thread, each multiplied with all rows at once: a decode's Q4_0 x16
  //    GEMVs (qwen3 0.6B shapes, 2 threads of this pool) streamed 24-28 GB/s in 8 chunks a
  //    thread, 30-34 in 1, 2 or 4; a chunk's stream restarts the prefetchers, and its
  //    prefetches past its end fetch the other thread's rows).
  const int64_t threads = pool_.size();
  int64_t chunk = n <= std::max<int64_t>(1, exact_rows_) ? (m + threads * 2 - 1) / (threads * 2) : 256;
  chunk = std::max<int64_t>(16, (chunk + 15) / 16 * 16);
  const int64_t n_chunks = (m + chunk - 1) / chunk;
  const int64_t act_block = 64;
  const int64_t ldy = static_cast<int64_t>(y.stride / sizeof(float));
  float* Y = frow(y, 0);
  const Repacked* rp = repacked(W);
  const uint8_t* Wp = static_cast<const uint8_t*>(rp && rp->planar ? rp->planar->data() : W.data);
  if (use_repacked(rp, W.type, n)) {
    // the repacked copy: one order per output for every row count (quant/cpu/repack.h)
    const auto* Wr = static_cast<const uint8_t*>(rp->buf->data());
    pool_.parallel_for(n_chunks, [&](int64_t c, int) {
      const int64_t i0 = c * chunk, i1 = std::min(m, i0 + chunk);
      for (int64_t r0 = 0; r0 < n; r0 += act_block)
        gemm_repacked(kernels_.isa, W.type, k, Wr, m, i0, i1, act + act_stride * static_cast<size_t>(r0), act_stride,
                      std::min(act_block, n - r0), Y + r0 * ldy, ldy);
    });
    return;
  }
  pool_.parallel_for(n_chunks, [&](int64_t c, int) {
    const int64_t i0 = c * chunk, i1 = std::min(m, i0 + chunk);
    for (int64_t r0 = 0; r0 < n; r0 += act_block) {
      const int64_t nr = std::min(act_block, n - r0);
      gemm_rows(W.type, k, Wp, W.stride, i0, i1, act + act_stride * static_cast<size_t>(r0), act_stride, nr,
                Y + r0 * ldy, ldy);
    }
  });
}

void CpuBackend::gemm_rows(GgmlType t, int64_t k, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                           const uint8_t* act, size_t act_stride, int64_t n, float* Y, int64_t ldy) const {
  if (n > 1 && n <= exact_rows_) {
    // Decode / verify sizes: the row-exact kernels (each weight block read once for all
    // rows), so that row r's bits do not depend on n.
    kernels_.gemm_exact(t, k, W, w_stride, i0, i1, act, act_stride, n, Y, ldy);
  } else {
    kernels_.gemm(t, k, W, w_stride, i0, i1, act, act_stride, n, Y, ldy);
  }
}

void CpuBackend::rope(const Tensor& x, const Tensor& pos, const RopeParams& p) {
  check(x.cols == static_cast<int64_t>(p.n_head) * p.head_dim && p.n_rot <= p.head_dim && p.n_rot % 2 == 0,
        "rope shapes");
  check(pos.type == GgmlType::I32 && pos.cols == 1 && pos.rows == x.rows, "rope positions must be i32 [n, 1]");
  const int32_t half = p.n_rot / 2;
  const int32_t* sec = p.sections;
  const int32_t sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
  check(sec[0] >= 0 && sec[1] >= 0 && sec[2] >= 0 && sec[3] >= 0, "rope sections must be non-negative");
  // Pair i rotates with the token position (true) or position 0 (ggml's IMROPE rule for text).
  auto text_pos = [&](int32_t i) {
    if (sect_dims == 0) return true;
    const int32_t s = i % sect_dims;
    return (s % 3 == 1 && s < 3 * sec[1]) || (s % 3 == 2 && s < 3 * sec[2]) || (s % 3 == 0 && s < 3 * sec[0]);
  };
  // theta_i = pos * base^(-2i/n_rot), computed as ggml does: repeated multiplication (a pair
  // with position 0 gets theta 0: cos 1, sin 0).
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  auto one = [&](int64_t r, int thread) {
    float* cs = thread_scratch(thread, static_cast<size_t>(p.n_rot));
    float theta = static_cast<float>(irow(pos, r)), theta0 = 0.0f;
    for (int32_t i = 0; i < half; ++i) {
      const float t = text_pos(i) ? theta : theta0;
      cs[2 * i] = std::cos(t);
      cs[2 * i + 1] = std::sin(t);
      theta *= theta_scale;
      theta0 *= theta_scale;
    }
    float* xr = frow(x, r);
    for (int32_t h = 0; h < p.n_head; ++h) {
      float* v = xr + static_cast<int64_t>(h) * p.head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
        v[i + half] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
      }
    }
  };
  if (x.rows * x.cols < 1 << 14) {  // decode / verify rows: not worth waking the pool
    for (int64_t r = 0; r < x.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::argmax(const Tensor& logits, const Tensor& out) {
  check(logits.type == GgmlType::F32 && out.type == GgmlType::I32 && out.cols == 1 && out.rows == logits.rows,
        "argmax shapes");
  for (int64_t r = 0; r < logits.rows; ++r) {
    const float* l = frow(logits, r);
    int64_t best = 0;
    for (int64_t i = 1; i < logits.cols; ++i)
      if (l[i] > l[best]) best = i;  // strict: the lowest index wins a tie
    reinterpret_cast<int32_t*>(static_cast<uint8_t*>(out.data) + out.stride * static_cast<size_t>(r))[0] =
        static_cast<int32_t>(best);
  }
}

void CpuBackend::argmax_ids(const Tensor& logits, const Tensor& ids, const Tensor& out) {
  check(ids.type == GgmlType::I32 && ids.cols == 1 && ids.rows == logits.cols, "argmax_ids shapes");
  argmax(logits, out);
  for (int64_t r = 0; r < out.rows; ++r) {
    auto* o = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(out.data) + out.stride * static_cast<size_t>(r));
    o[0] = *reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(ids.data) + ids.stride * static_cast<size_t>(o[0]));
  }
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check(gate.cols == up.cols && out.cols == gate.cols && gate.rows == up.rows && out.rows == gate.rows,
        "swiglu shapes");
  const ExpKernels& ek = exp_kernels(kernels_.isa);
  auto one = [&](int64_t r, int) { ek.swiglu(frow(gate, r), frow(up, r), frow(out, r), gate.cols); };
  if (gate.rows * gate.cols < 1 << 14) {  // decode / verify rows: not worth waking the pool
    for (int64_t r = 0; r < gate.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(gate.rows, one);
  }
}

void CpuBackend::add(const Tensor& x, const Tensor& y) {
  check(x.cols == y.cols && x.rows == y.rows, "add shapes");
  for (int64_t r = 0; r < x.rows; ++r) {
    float* a = frow(x, r);
    const float* b = frow(y, r);
    for (int64_t i = 0; i < x.cols; ++i) a[i] += b[i];
  }
}

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  check(src.cols == dst.cols && src.rows == dst.rows && src.type == dst.type, "copy shapes");
  const size_t rb = row_bytes(src.type, src.cols);
  for (int64_t r = 0; r < src.rows; ++r)
    std::memcpy(static_cast<uint8_t*>(dst.data) + dst.stride * static_cast<size_t>(r),
                static_cast<const uint8_t*>(src.data) + src.stride * static_cast<size_t>(r), rb);
}

}  // namespace df::cpu
