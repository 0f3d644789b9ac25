// Attention over the KV cache on the CPU, computed as llama.cpp's non-flash path computes it
// so that results agree to the last bit that summation order allows:
//   scores = K q          (q rounded to the cache type; the matrix kernels' dot products)
//   p      = softmax(scale * scores, causal mask)   (ggml's vector exp and reduction order)
//   out    = V^T p        (p rounded to the cache type; a dot over positions, V transposed)
// The dot over positions runs over llama.cpp's padded length (a multiple of 256 past the
// last used position) with zero probabilities beyond the causal limit, which leaves the sums
// unchanged but keeps the kernels' blocking identical. The product with V stops at the
// positions a block of rows sees, rounded up to 64 (kVSpan): every float kernel (scalar,
// AVX2, AVX-512) assigns position j to the same accumulator lane and chain whatever the
// length when the length is a multiple of 64, and the dropped terms are p = 0 times a finite
// V (an accumulator that starts at +0 never holds -0, so adding +-0 keeps its bits): the
// same bits as the full padded length, for a quarter of its work at a short context
// (decode of the first tokens: 11 % of a Q4_0 0.6B token's time before).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/exp_math.h"
#include "common/error.h"

namespace df::cpu {
namespace {

constexpr int64_t kPad = 256;  // llama.cpp's KV padding
constexpr int64_t kVSpan = 64;  // V product length granule (above)

int64_t pad_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cpu attention: ") + what);
}

int32_t irow(const Tensor& t, int64_t r) {
  return *reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(t.data) + t.stride * static_cast<size_t>(r));
}

void check_pos(const Tensor& pos, int64_t n) {
  check(pos.type == GgmlType::I32 && pos.cols == 1 && pos.rows == n, "positions must be i32 [n, 1]");
}

// Softmax numerators and their sum as ggml_vec_soft_max_f32 computes them: exp(x - max) with
// the ISA's vector exp, summed per vector of lanes (in the order of the ISA's horizontal
// add) into a double. Positions past n are masked (exp = 0).
double softmax_exp(Isa isa, float* x, int64_t n, float mx) {
  const int64_t lanes = ggml_lanes(isa);
  double sum = 0.0;
  if (lanes == 1) {
    for (int64_t j = 0; j < n; ++j) sum += (x[j] = std::exp(x[j] - mx));
    return sum;
  }
  exp_kernels(isa).exp_shift(x, mx, n);
  float v[16];
  for (int64_t c = 0; c < n; c += lanes) {
    for (int64_t l = 0; l < lanes; ++l) v[l] = c + l < n ? x[c + l] : 0.0f;
    float s[8];
    for (int i = 0; i < 8; ++i) s[i] = lanes == 16 ? v[i + 8] + v[i] : v[i];  // 512 -> 256 bits
    float t[4];
    for (int i = 0; i < 4; ++i) t[i] = s[i + 4] + s[i];  // 256 -> 128 bits
    sum += static_cast<double>((t[0] + t[2]) + (t[1] + t[3]));
  }
  return sum;
}

}  // namespace

KvCache CpuBackend::alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) {
  check(type == GgmlType::F16 || type == GgmlType::F32, "KV cache type must be F16 or F32");
  check(n_ctx > 0 && kv_dim > 0, "KV cache shape");
  KvCache c;
  c.n_ctx = n_ctx;
  c.kv_dim = kv_dim;
  c.type = type;
  const int64_t cap = pad_up(n_ctx, kPad);
  // Host buffers are zeroed: padded positions hold finite values.
  c.k = alloc_tensor(*this, type, kv_dim, cap, c.buffers);  // [cap, kv_dim]: one row per position
  c.v = alloc_tensor(*this, type, cap, kv_dim, c.buffers);  // [kv_dim, cap]: transposed
  return c;
}

void CpuBackend::kv_store(KvCache& c, const Tensor& k, const Tensor& v, const Tensor& pos) {
  check(k.cols == c.kv_dim && v.cols == c.kv_dim && k.rows == v.rows, "kv_store shapes");
  check_pos(pos, k.rows);
  for (int64_t r = 0; r < k.rows; ++r) check(irow(pos, r) >= 0 && irow(pos, r) < c.n_ctx, "kv_store past the cache");
  const bool f16 = c.type == GgmlType::F16;
  // F16 rows by the kernels' activation rounding (F16C where there is one: the bits of
  // fp32_to_fp16, NaN payloads included; types.h)
  for (int64_t r = 0; r < k.rows; ++r) {
    const auto* kr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(k.data) + k.stride * r);
    uint8_t* dst = static_cast<uint8_t*>(c.k.data) + c.k.stride * static_cast<size_t>(irow(pos, r));
    if (f16) {
      kernels_.quantize_act(GgmlType::F16, kr, dst, c.kv_dim);
    } else {
      std::memcpy(dst, kr, static_cast<size_t>(c.kv_dim) * sizeof(float));
    }
  }
  // V is stored transposed (cache row i = dimension i over the positions): rows of
  // consecutive positions go in blocks of kVBlock, each cache row getting one contiguous run
  // per block instead of one element a position (a prefill wrote 1024 scattered elements per
  // token and layer: 2 % of a qwen3 0.6B prefill).
  constexpr int64_t kVBlock = 16;
  const size_t row_bytes = static_cast<size_t>(c.kv_dim) * (f16 ? sizeof(uint16_t) : sizeof(float));
  uint8_t* blk = thread_bytes(0, kVBlock * row_bytes);  // [kVBlock][kv_dim], the cache's type
  auto scatter = [&]<class T>(T, int64_t at, int64_t nb) {
    const T* src = reinterpret_cast<const T*>(blk);
    for (int64_t i = 0; i < c.kv_dim; ++i) {
      T* dst = reinterpret_cast<T*>(static_cast<uint8_t*>(c.v.data) + c.v.stride * static_cast<size_t>(i)) + at;
      for (int64_t b = 0; b < nb; ++b) dst[b] = src[b * c.kv_dim + i];
    }
  };
  for (int64_t r0 = 0; r0 < v.rows;) {
    const int64_t at = irow(pos, r0);
    int64_t nb = 1;
    while (nb < kVBlock && r0 + nb < v.rows && irow(pos, r0 + nb) == at + nb) ++nb;
    for (int64_t b = 0; b < nb; ++b) {
      const auto* vr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(v.data) + v.stride * (r0 + b));
      if (f16) {
        kernels_.quantize_act(GgmlType::F16, vr, blk + row_bytes * b, c.kv_dim);
      } else {
        std::memcpy(blk + row_bytes * b, vr, row_bytes);
      }
    }
    if (f16) {
      scatter(uint16_t{}, at, nb);
    } else {
      scatter(float{}, at, nb);
    }
    r0 += nb;
  }
}

void CpuBackend::attention(const Tensor& q, const KvCache& c, const Tensor& pos, const AttentionParams& p,
                           const Tensor& out) {
  const int64_t hd = p.head_dim, n = q.rows;
  check(q.cols == p.n_head * hd && out.cols == q.cols && out.rows == n, "q/out shapes");
  check(c.kv_dim == p.n_head_kv * hd && p.n_head % p.n_head_kv == 0, "head counts");
  check_pos(pos, n);
  for (int64_t r = 0; r < n; ++r)
    check(irow(pos, r) >= 0 && irow(pos, r) < c.n_ctx && (r == 0 || irow(pos, r) > irow(pos, r - 1)),
          "attention positions must ascend within the cache");
  // Row r sees keys [0, pos[r]]; the positions ascend, so the last row sees the most.
  const int64_t n_keys = irow(pos, n - 1) + 1;                          // keys of the last row
  const int64_t len = std::min(c.v.cols, std::max(kPad, pad_up(n_keys, kPad)));  // llama's n_kv
  const int64_t group = p.n_head / p.n_head_kv;
  const GgmlType t = c.type;
  const size_t q_stride = act_row_bytes(t, hd), p_stride = act_row_bytes(t, len);
  const size_t elem = t == GgmlType::F16 ? 2 : 4;
  const Isa isa = kernels_.isa;
  // One task per (head, block of query rows).
  const int64_t block = 32;
  const int64_t n_blocks = (n + block - 1) / block;
  pool_.parallel_for(p.n_head * n_blocks, [&](int64_t task, int thread) {
    const int64_t h = task / n_blocks, r0 = task % n_blocks * block;
    const int64_t nr = std::min(block, n - r0), hk = h / group;
    const int64_t keys = irow(pos, r0 + nr - 1) + 1;  // keys any row of this block sees
    const int64_t lv = std::min(len, pad_up(keys, kVSpan));  // positions of the V product
    float* scores = thread_scratch(thread, static_cast<size_t>(nr * len));  // [nr, len]
    uint8_t* act = thread_bytes(thread, static_cast<size_t>(nr) * std::max(q_stride, p_stride));
    // 1. scores = K q, for this head's rows
    for (int64_t r = 0; r < nr; ++r) {
      const auto* qr = reinterpret_cast<const float*>(static_cast<const uint8_t*>(q.data) + q.stride * (r0 + r)) + h * hd;
      kernels_.quantize_act(t, qr, act + q_stride * r, hd);
    }
    const uint8_t* kbase = static_cast<const uint8_t*>(c.k.data) + static_cast<size_t>(hk * hd) * elem;
    // (row-exact kernels when the call has at most exact_rows rows: row-count independence)
    const bool exact = n <= exact_rows_;
    const auto gemm = exact ? kernels_.gemm_exact : kernels_.gemm;
    gemm(t, hd, kbase, c.k.stride, 0, keys, act, q_stride, nr, scores, len);
    // 2. probabilities, rounded to the cache type for the product with V
    for (int64_t r = 0; r < nr; ++r) {
      float* s = scores + r * len;
      const int64_t valid = irow(pos, r0 + r) + 1;
      float mx = -INFINITY;
      for (int64_t j = 0; j < valid; ++j) mx = std::max(mx, s[j] *= p.scale);
      const double sum = softmax_exp(isa, s, valid, mx);
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < valid; ++j) s[j] *= inv;
      std::fill(s + valid, s + lv, 0.0f);
      kernels_.quantize_act(t, s, act + p_stride * r, lv);
    }
    // 3. out = V^T p, rows hk*hd .. of the transposed V cache
    const uint8_t* vbase = static_cast<const uint8_t*>(c.v.data) + c.v.stride * static_cast<size_t>(hk * hd);
    float* o = reinterpret_cast<float*>(static_cast<uint8_t*>(out.data) + out.stride * r0) + h * hd;
    const int64_t ldo = static_cast<int64_t>(out.stride / sizeof(float));
    gemm(t, lv, vbase, c.v.stride, 0, hd, act, p_stride, nr, o, ldo);
  });
}

}  // namespace df::cpu
