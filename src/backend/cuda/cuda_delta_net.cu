// CudaBackend::delta_net_core (backend.h "fused ops"): the Gated DeltaNet core of a decode or
// verify step (1..8 rows) in two launches per sequence instead of six:
//   1. ops/ssm_conv.cuh launch_ssm_conv_silu_l2: the conv, SILU of every channel, l2 norm of the
//      q and k heads (a block per head's channels);
//   2. ops/delta_rule.cuh launch_gated_delta_rule_norm_gate: the delta rule, then the value
//      head's rms_norm and silu(z) gate by the head's last block.
// Both reuse the unfused kernels' device functions in their order: the same bits as the
// default's sequence on this backend, so a row's result does not depend on the row count,
// and --plain-small-kernels (CudaOptions::lean_kernels = false) or --no-fuse run the six ops.
// Off unless CudaOptions::fuse_deltanet (--cuda-fuse-deltanet): not yet run on a GPU.
// More rows (prefill), strided or misaligned tensors fall back to the default as well.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/ssm_conv.cuh"

namespace df::cuda {
namespace {

bool f32(const Tensor& t) { return t.type == GgmlType::F32 && t.data; }
bool dense_f32(const Tensor& t) { return f32(t) && t.stride == static_cast<size_t>(t.cols) * sizeof(float); }
bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }
float* fp(const Tensor& t) { return static_cast<float*>(t.data); }
int64_t fstride(const Tensor& t) { return static_cast<int64_t>(t.stride / sizeof(float)); }
float* row(const Tensor& t, int64_t r) { return fp(t) + r * fstride(t); }

// Whether the two-launch path takes this call (shapes as backend.h's DeltaNetCore).
bool fusable(const DeltaNetCore& a, std::span<const DeltaNetSeq> seqs) {
  const int64_t n = a.o.rows, d = a.head_dim, Hk = a.n_k_heads;
  if (n < 1 || n > cudamv::kMaxRows || Hk < 1 || !delta_rule_head_size_supported(static_cast<int32_t>(d))) return false;
  if (a.o.cols % d != 0) return false;
  const int64_t Hv = a.o.cols / d, C = 2 * Hk * d + Hv * d, K = a.conv_w.cols;
  if (Hv % Hk != 0 || K < 2 || K > kSsmConvMaxKernel) return false;
  if (!f32(a.qkv) || a.qkv.stride % sizeof(float) != 0 || a.qkv.cols != C || a.qkv.rows != n) return false;
  if (!dense_f32(a.conv) || a.conv.cols != C || a.conv.rows != n || !aligned16(a.conv.data) || C % 4 != 0) return false;
  if (a.conv.data == a.qkv.data) return false;
  if (!dense_f32(a.conv_w) || a.conv_w.rows != C || !dense_f32(a.norm) || a.norm.cols != d) return false;
  if (!f32(a.z) || a.z.cols != Hv * d || a.z.rows != n || !f32(a.o) || a.o.stride % sizeof(float) != 0) return false;
  if (!f32(a.g) || !f32(a.beta) || a.g.cols != Hv || a.beta.cols != Hv || a.g.rows != n || a.beta.rows != n) return false;
  int64_t next = 0;  // the sequences cover rows [0, n) in order (the model's segments do)
  for (const DeltaNetSeq& s : seqs) {
    if (s.row0 != next || s.n < 0) return false;
    next += s.n;
    if (!dense_f32(s.conv_state) || s.conv_state.cols != C || s.conv_state.rows != K - 1) return false;
    if (!dense_f32(s.ssm_state) || s.ssm_state.cols != d || s.ssm_state.rows != Hv * d || !aligned16(s.ssm_state.data))
      return false;
    if (!s.conv_snap.empty() && (!dense_f32(s.conv_snap) || s.conv_snap.cols != C || s.conv_snap.rows % (K - 1) != 0))
      return false;
    if (!s.ssm_snap.empty() && (!dense_f32(s.ssm_snap) || s.ssm_snap.cols != d || s.ssm_snap.rows % (Hv * d) != 0 ||
                                !aligned16(s.ssm_snap.data)))
      return false;
  }
  return next == n;
}

}  // namespace

void CudaBackend::delta_net_core(const DeltaNetCore& a, std::span<const DeltaNetSeq> seqs) {
  OpScope ps(prof_.get(), "delta_net_core");
  if (!fuse_ || !lean_ || !fuse_deltanet_ || !fusable(a, seqs)) {
    Backend::delta_net_core(a, seqs);  // the six ops (their own checks and errors)
    return;
  }
  ctx_->make_current();
  const int64_t d = a.head_dim, Hk = a.n_k_heads, kd = Hk * d, Hv = a.o.cols / d, C = a.conv.cols, K = a.conv_w.cols;
  int32_t* counters = ctx_->counters(static_cast<size_t>(Hv));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));  // as the default's
  for (const DeltaNetSeq& s : seqs) {
    if (s.n == 0) continue;
    const int64_t conv_snaps = s.conv_snap.empty() ? 0 : std::min(s.n, s.conv_snap.rows / (K - 1));
    float* conv = row(a.conv, s.row0);
    launch_ssm_conv_silu_l2(row(a.qkv, s.row0), fstride(a.qkv), fp(s.conv_state), fp(a.conv_w), conv, fstride(a.conv),
                            s.n, C, static_cast<int>(K), conv_snaps ? fp(s.conv_snap) : nullptr, conv_snaps,
                            ConvNorm{d, 2 * kd, a.eps}, ctx_->stream(), small_pdl_);
    const int64_t ssm_snaps = s.ssm_snap.empty() ? 0 : std::min(s.n, s.ssm_snap.rows / (Hv * d));
    DeltaRuleArgs r;
    r.q = conv, r.q_stride = C;
    r.k = conv + kd, r.k_stride = C;
    r.v = conv + 2 * kd, r.v_stride = C;
    r.g = row(a.g, s.row0), r.g_stride = fstride(a.g);
    r.beta = row(a.beta, s.row0), r.beta_stride = fstride(a.beta);
    r.state = fp(s.ssm_state);
    r.out = row(a.o, s.row0), r.out_stride = fstride(a.o);
    r.snapshots = ssm_snaps ? fp(s.ssm_snap) : nullptr;
    r.n_snapshots = ssm_snaps;
    r.n = s.n;
    r.d = static_cast<int32_t>(d);
    r.n_k_heads = static_cast<int32_t>(Hk);
    r.n_v_heads = static_cast<int32_t>(Hv);
    r.scale = scale;
    r.pdl = small_pdl_;
    r.z = row(a.z, s.row0), r.z_stride = fstride(a.z);
    r.norm = fp(a.norm), r.eps = a.eps;
    r.counters = counters;
    launch_gated_delta_rule_norm_gate(r, ctx_->stream());
  }
}

}  // namespace df::cuda
