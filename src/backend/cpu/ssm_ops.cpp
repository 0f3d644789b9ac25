// CPU ops of recurrent (Gated DeltaNet) layers and gates: elementwise activations, grouped L2
// normalisation, the causal depthwise convolution with its carried state, and the gated delta
// rule. Formulas follow ggml's CPU ops (ggml-cpu/ops.cpp, unary-ops.cpp) so that results agree
// with llama.cpp up to summation order.
#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/exp_math.h"
#include "common/error.h"

namespace df::cpu {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cpu backend: ") + what);
}

float* frow(const Tensor& t, int64_t r) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(t.data) + t.stride * static_cast<size_t>(r));
}

bool is_f32(const Tensor& t) { return t.type == GgmlType::F32; }

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// Rows of elementwise work below this many elements run on the calling thread only.
constexpr int64_t kSerialElems = 1 << 14;

}  // namespace

void CpuBackend::unary(UnaryOp op, const Tensor& x, const Tensor& y) {
  check(is_f32(x) && is_f32(y) && x.cols == y.cols && x.rows == y.rows, "unary shapes");
  const ExpKernels& ek = exp_kernels(kernels_.isa);
  auto one = [&](int64_t r, int) {
    const float* a = frow(x, r);
    float* b = frow(y, r);
    switch (op) {
      case UnaryOp::SILU:  // ggml's vector exp over whole vectors of the row, expf after
        ek.silu(a, b, x.cols);
        break;
      case UnaryOp::SIGMOID:
        for (int64_t i = 0; i < x.cols; ++i) b[i] = sigmoid(a[i]);
        break;
      case UnaryOp::SOFTPLUS:
        for (int64_t i = 0; i < x.cols; ++i) b[i] = softplus(a[i]);
        break;
    }
  };
  if (x.rows * x.cols < kSerialElems) {
    for (int64_t r = 0; r < x.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) {
  check(is_f32(gate) && is_f32(x) && is_f32(out) && gate.cols == x.cols && out.cols == x.cols &&
            gate.rows == x.rows && out.rows == x.rows,
        "sigmoid_mul shapes");
  auto one = [&](int64_t r, int) {
    const float* g = frow(gate, r);
    const float* a = frow(x, r);
    float* o = frow(out, r);
    for (int64_t i = 0; i < x.cols; ++i) o[i] = a[i] * sigmoid(g[i]);
  };
  if (x.rows * x.cols < kSerialElems) {
    for (int64_t r = 0; r < x.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) {
  check(is_f32(x) && is_f32(bias) && is_f32(scale) && is_f32(out), "softplus_scale types");
  check(bias.cols == x.cols && scale.cols == x.cols && out.cols == x.cols && out.rows == x.rows,
        "softplus_scale shapes");
  const float* b = static_cast<const float*>(bias.data);
  const float* s = static_cast<const float*>(scale.data);
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* a = frow(x, r);
    float* o = frow(out, r);
    for (int64_t i = 0; i < x.cols; ++i) o[i] = softplus(a[i] + b[i]) * s[i];
  }
}

void CpuBackend::l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) {
  check(is_f32(x) && is_f32(y) && x.cols == y.cols && x.rows == y.rows, "l2_norm shapes");
  check(group > 0 && x.cols % group == 0, "l2_norm group does not divide the row");
  const int64_t n_groups = x.cols / group;
  auto one = [&](int64_t r, int) {
    for (int64_t gi = 0; gi < n_groups; ++gi) {
      const float* a = frow(x, r) + gi * group;
      float* b = frow(y, r) + gi * group;
      double sum = 0.0;  // ggml sums the float squares in double
      for (int64_t i = 0; i < group; ++i) sum += static_cast<double>(a[i] * a[i]);
      const float inv = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
      for (int64_t i = 0; i < group; ++i) b[i] = a[i] * inv;
    }
  };
  if (x.rows * x.cols < kSerialElems) {
    for (int64_t r = 0; r < x.rows; ++r) one(r, 0);
  } else {
    pool_.parallel_for(x.rows, one);
  }
}

void CpuBackend::ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                          const Tensor& snapshots) {
  const int64_t C = x.cols, n = x.rows, K = w.cols, H = K - 1;  // H: rows of carried history
  check(is_f32(x) && is_f32(state) && is_f32(w) && is_f32(y), "ssm_conv types must be f32");
  check(K >= 2 && w.rows == C && state.cols == C && state.rows == H && y.cols == C && y.rows == n,
        "ssm_conv shapes");
  check(y.data != x.data, "ssm_conv output must not alias its input");
  constexpr int64_t kMaxKernel = 16;
  check(K <= kMaxKernel, "ssm_conv kernel wider than 16");
  // Slots of the state after rows 0 .. n_snap-1 (slot t: window rows t+1 .. t+H).
  const int64_t n_snap = snapshots.empty() ? 0 : std::min(n, snapshots.rows / H);
  if (!snapshots.empty())
    check(is_f32(snapshots) && snapshots.cols == C && snapshots.rows % H == 0, "ssm_conv snapshots shape");
  // Row r of the window [state; x]: the K-1 carried inputs, then the chunk's inputs.
  auto window = [&](int64_t r) -> const float* { return r < H ? frow(state, r) : frow(x, r - H); };
  // Tasks are blocks of channels, so that each task reads its weights once and walks the
  // window row by row (contiguous in channels).
  constexpr int64_t kBlock = 64;
  const int64_t n_blocks = (C + kBlock - 1) / kBlock;
  auto block = [&](int64_t bi, int) {
    const int64_t c0 = bi * kBlock, nc = std::min(kBlock, C - c0);
    float wt[kMaxKernel][kBlock];  // weights transposed: wt[i][c] = w[c0 + c][i]
    for (int64_t c = 0; c < nc; ++c) {
      const float* wr = frow(w, c0 + c);
      for (int64_t i = 0; i < K; ++i) wt[i][c] = wr[i];
    }
    for (int64_t t = 0; t < n; ++t) {
      float* out = frow(y, t) + c0;
      for (int64_t c = 0; c < nc; ++c) out[c] = 0.0f;
      for (int64_t i = 0; i < K; ++i) {  // ggml's order: sum over i = 0 .. K-1
        const float* in = window(t + i) + c0;
        ssm_.fma_row(out, in, wt[i], nc);
      }
    }
    for (int64_t t = 0; t < n_snap; ++t)
      for (int64_t r = 0; r < H; ++r) {
        const float* src = window(t + 1 + r) + c0;
        std::copy(src, src + nc, frow(snapshots, t * H + r) + c0);
      }
    // New state: window rows n .. n + H - 1. Rows still in the old state move up (read ahead
    // of the write, so in place is safe).
    for (int64_t r = 0; r < H; ++r) {
      const float* src = window(n + r) + c0;
      float* dst = frow(state, r) + c0;
      if (src != dst) std::copy(src, src + nc, dst);
    }
  };
  if (n * C < kSerialElems) {
    for (int64_t b = 0; b < n_blocks; ++b) block(b, 0);
  } else {
    pool_.parallel_for(n_blocks, block);
  }
}

void CpuBackend::gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                  const Tensor& beta, const Tensor& state, float scale, const Tensor& out,
                                  const Tensor& snapshots) {
  const int64_t d = state.cols, n = v.rows;
  check(is_f32(q) && is_f32(k) && is_f32(v) && is_f32(g) && is_f32(beta) && is_f32(state) && is_f32(out),
        "gated_delta_rule types must be f32");
  check(d > 0 && v.cols % d == 0 && q.cols % d == 0 && k.cols == q.cols, "gated_delta_rule head sizes");
  const int64_t Hv = v.cols / d, Hk = q.cols / d;
  check(Hk > 0 && Hv % Hk == 0, "gated_delta_rule: value heads must be a multiple of key heads");
  check(q.rows == n && k.rows == n && g.rows == n && beta.rows == n && out.rows == n, "gated_delta_rule rows");
  check(g.cols == Hv && beta.cols == Hv && out.cols == Hv * d && state.rows == Hv * d, "gated_delta_rule shapes");
  check(state.stride == static_cast<size_t>(d) * sizeof(float), "gated_delta_rule state must be dense");
  const int64_t n_snap = snapshots.empty() ? 0 : std::min(n, snapshots.rows / (Hv * d));
  if (!snapshots.empty())
    check(is_f32(snapshots) && snapshots.cols == d && snapshots.rows % (Hv * d) == 0 &&
              snapshots.stride == state.stride,
          "gated_delta_rule snapshots shape");
  // One task per value head: its d x d state stays in cache while the chunk's tokens run.
  // With snapshots, row t < n_snap updates the state from where row t - 1 left it straight
  // into slot t (no copy per row); the live state gets the last one copied once.
  auto head = [&](int64_t h, int) {
    const int64_t hk = h % Hk;
    float* S = frow(state, h * d);  // [d rows (value dim), d cols (key dim)]
    const float* cur = S;           // the state after the previous row
    for (int64_t t = 0; t < n; ++t) {
      const float* qt = frow(q, t) + hk * d;
      const float* kt = frow(k, t) + hk * d;
      const float* vt = frow(v, t) + h * d;
      const float decay = std::exp(frow(g, t)[h]);
      const float b = frow(beta, t)[h];
      float* o = frow(out, t) + h * d;
      float* dst = t < n_snap ? frow(snapshots, (t * Hv + h) * d) : S;  // slot t, head h
      for (int64_t j = 0; j < d; ++j)
        o[j] = ssm_.delta_rule_row(dst + j * d, cur + j * d, kt, qt, decay, vt[j], b, d) * scale;
      cur = dst;
    }
    if (cur != S) std::copy(cur, cur + d * d, S);
  };
  pool_.parallel_for(Hv, head);
}

}  // namespace df::cpu
