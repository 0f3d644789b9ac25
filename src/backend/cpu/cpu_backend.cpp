#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/error.h"

namespace df::cpu {
namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(size_t bytes) : size_(bytes) {
    // 64-byte aligned for SIMD loads; zeroed so fresh caches hold no garbage.
    const size_t rounded = (bytes + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (!data_) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
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

int resolve_threads(int n) {
  if (n > 0) return n;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace

CpuBackend::CpuBackend(const CpuOptions& opt)
    : kernels_(kernels(opt.isa)),
      attn_(attn_vec(opt.isa)),
      ssm_(ssm_vec(opt.isa)),
      pool_(resolve_threads(opt.threads)),
      thread_buf_(static_cast<size_t>(pool_.size())) {}

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
  return t;
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

void CpuBackend::get_rows(const Tensor& table, const int32_t* ids, int64_t n, const Tensor& out) {
  check(out.type == GgmlType::F32 && out.cols == table.cols && out.rows >= n, "get_rows shapes");
  for (int64_t i = 0; i < n; ++i) {
    check(ids[i] >= 0 && ids[i] < table.rows, "get_rows id out of range");
    const uint8_t* src = static_cast<const uint8_t*>(table.data) + table.stride * static_cast<size_t>(ids[i]);
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
  if (n == 1) {
    quant(0, 0);
  } else {
    pool_.parallel_for(n, quant);
  }
  // 2. split the weight rows into chunks; each task streams its chunk once and multiplies it
  //    with every activation row, in blocks that stay in L2.
  const int64_t threads = pool_.size();
  int64_t chunk = n == 1 ? (m + threads * 8 - 1) / (threads * 8) : 64;
  chunk = std::max<int64_t>(16, (chunk + 15) / 16 * 16);
  const int64_t n_chunks = (m + chunk - 1) / chunk;
  const int64_t act_block = 64;
  const int64_t ldy = static_cast<int64_t>(y.stride / sizeof(float));
  float* Y = frow(y, 0);
  const uint8_t* Wp = static_cast<const uint8_t*>(W.data);
  pool_.parallel_for(n_chunks, [&](int64_t c, int) {
    const int64_t i0 = c * chunk, i1 = std::min(m, i0 + chunk);
    for (int64_t r0 = 0; r0 < n; r0 += act_block) {
      const int64_t nr = std::min(act_block, n - r0);
      kernels_.gemm(W.type, k, Wp, W.stride, i0, i1, act + act_stride * static_cast<size_t>(r0),
                    act_stride, nr, Y + r0 * ldy, ldy);
    }
  });
}

void CpuBackend::rope_neox(const Tensor& x, int32_t n_head, int32_t head_dim, int32_t n_rot,
                           int64_t pos0, float freq_base) {
  check(x.cols == static_cast<int64_t>(n_head) * head_dim && n_rot <= head_dim && n_rot % 2 == 0,
        "rope shapes");
  const int32_t half = n_rot / 2;
  // theta_i = pos * base^(-2i/n_rot), computed as ggml does: repeated multiplication.
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  auto one = [&](int64_t r, int thread) {
    float* cs = thread_scratch(thread, static_cast<size_t>(n_rot));
    float theta = static_cast<float>(pos0 + r);
    for (int32_t i = 0; i < half; ++i) {
      cs[2 * i] = std::cos(theta);
      cs[2 * i + 1] = std::sin(theta);
      theta *= theta_scale;
    }
    float* xr = frow(x, r);
    for (int32_t h = 0; h < n_head; ++h) {
      float* v = xr + static_cast<int64_t>(h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const float x0 = v[i], x1 = v[i + half];
        v[i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
        v[i + half] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
      }
    }
  };
  if (x.rows == 1) {
    one(0, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::kv_store(const Tensor& cache, const Tensor& rows, int64_t pos0) {
  check(cache.cols == rows.cols && pos0 + rows.rows <= cache.rows, "kv_store shapes");
  for (int64_t r = 0; r < rows.rows; ++r) {
    const float* src = frow(rows, r);
    uint8_t* dst = static_cast<uint8_t*>(cache.data) + cache.stride * static_cast<size_t>(pos0 + r);
    if (cache.type == GgmlType::F16) {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < rows.cols; ++i) d[i] = fp32_to_fp16(src[i]);
    } else {
      std::memcpy(dst, src, static_cast<size_t>(rows.cols) * sizeof(float));
    }
  }
}

void CpuBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           int64_t pos0, const AttentionParams& p, const Tensor& out) {
  const int64_t hd = p.head_dim;
  check(q.cols == p.n_head * hd && out.cols == q.cols && out.rows == q.rows, "attention q/out shapes");
  check(k_cache.cols == p.n_head_kv * hd && v_cache.cols == k_cache.cols, "attention cache shapes");
  check(p.n_head % p.n_head_kv == 0, "attention head counts");
  check(pos0 + q.rows <= k_cache.rows, "attention past the cache");
  const bool f16 = k_cache.type == GgmlType::F16;
  const int64_t group = p.n_head / p.n_head_kv;
  const int64_t n_tasks = q.rows * p.n_head;
  auto one = [&](int64_t task, int thread) {
    const int64_t r = task / p.n_head, h = task % p.n_head, hk = h / group;
    const int64_t n_keys = pos0 + r + 1;  // causal: keys 0 .. pos0 + r
    float* buf = thread_scratch(thread, static_cast<size_t>(hd + n_keys));
    float* qv = buf;            // [hd] query, rounded like the cache
    float* scores = buf + hd;   // [n_keys]
    const float* qsrc = frow(q, r) + h * hd;
    for (int64_t i = 0; i < hd; ++i) qv[i] = f16 ? fp16_to_fp32(fp32_to_fp16(qsrc[i])) : qsrc[i];
    float mx = -INFINITY;
    for (int64_t j = 0; j < n_keys; ++j) {
      const uint8_t* krow = static_cast<const uint8_t*>(k_cache.data) + k_cache.stride * static_cast<size_t>(j);
      const float d = f16 ? attn_.dot_f16(qv, reinterpret_cast<const uint16_t*>(krow) + hk * hd, hd)
                          : attn_.dot_f32(qv, reinterpret_cast<const float*>(krow) + hk * hd, hd);
      scores[j] = d * p.scale;
      mx = std::max(mx, scores[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n_keys; ++j) {
      scores[j] = std::exp(scores[j] - mx);
      sum += scores[j];
    }
    float* o = frow(out, r) + h * hd;
    std::fill(o, o + hd, 0.0f);
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < n_keys; ++j) {
      const uint8_t* vrow = static_cast<const uint8_t*>(v_cache.data) + v_cache.stride * static_cast<size_t>(j);
      const float a = scores[j] * inv;
      if (f16) {
        attn_.scale_axpy_f16(o, 1.0f, reinterpret_cast<const uint16_t*>(vrow) + hk * hd, a, hd);
      } else {
        attn_.scale_axpy_f32(o, 1.0f, reinterpret_cast<const float*>(vrow) + hk * hd, a, hd);
      }
    }
  };
  pool_.parallel_for(n_tasks, one);
}

void CpuBackend::swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  check(gate.cols == up.cols && out.cols == gate.cols && gate.rows == up.rows && out.rows == gate.rows,
        "swiglu shapes");
  auto one = [&](int64_t r, int) {
    const float* g = frow(gate, r);
    const float* u = frow(up, r);
    float* o = frow(out, r);
    for (int64_t i = 0; i < gate.cols; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  };
  if (gate.rows == 1) {
    one(0, 0);
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
