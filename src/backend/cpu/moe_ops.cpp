// CPU ops of mixture-of-experts FFNs, computed as llama.cpp's CPU backend computes the graph
// of build_moe_ffn (llama-graph.cpp) with softmax gating:
//   probs    = soft_max(logits)                 ggml_vec_soft_max_f32: exp(x - max) with the
//                                               ISA's vector exp, lane sums into a double
//   ids      = argsort_top_k(probs, k)          decreasing probability
//   weights  = probs[ids] / clamp(sum, 2^-14)   sum_rows in double, then a float division
//   experts  = mul_mat_id(W, x, ids)            each expert's rows grouped (as ggml groups them),
//                                               every product the dense matmul's kernel
//   out      = sum_j experts_j * weights_j      ggml_mul, then ggml_add in slot order
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/exp_math.h"
#include "common/error.h"
#include "quant/cpu/repack.h"

namespace df::cpu {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cpu backend: ") + what);
}

template <typename T = float>
T* trow(const Tensor& t, int64_t r) {
  return reinterpret_cast<T*>(static_cast<uint8_t*>(t.data) + t.stride * static_cast<size_t>(r));
}

// p = softmax(x) over n values as ggml_compute_forward_soft_max_f32 computes a row without a
// mask: max, numerators exp(x - max) (the ISA's vector exp over whole vectors, expf for the
// rest), their sum in double (each vector reduced to a float first, in the order of the ISA's
// horizontal add), then a multiplication by (float)(1 / sum).
void softmax_row(Isa isa, const float* x, float* p, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) mx = mx > x[i] ? mx : x[i];  // ggml's MAX(max, x[i])
  const int64_t lanes = ggml_lanes(isa);
  const int64_t vec_end = lanes == 1 ? 0 : n / lanes * lanes;
  std::memcpy(p, x, static_cast<size_t>(n) * sizeof(float));
  exp_kernels(isa).exp_shift(p, mx, vec_end);
  double sum = 0.0;
  for (int64_t c = 0; c < vec_end; c += lanes) {
    const float* v = p + c;
    float s[8];
    for (int i = 0; i < 8; ++i) s[i] = lanes == 16 ? v[i + 8] + v[i] : v[i];  // 512 -> 256 bits
    float t[4];
    for (int i = 0; i < 4; ++i) t[i] = s[i + 4] + s[i];  // 256 -> 128 bits
    sum += static_cast<double>((t[0] + t[2]) + (t[1] + t[3]));
  }
  for (int64_t i = vec_end; i < n; ++i) {
    p[i] = std::exp(x[i] - mx);
    sum += static_cast<double>(p[i]);
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) p[i] *= inv;
}

}  // namespace

void CpuBackend::moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids,
                           const Tensor& weights) {
  const int64_t n = logits.rows, E = logits.cols, k = ids.cols;
  check(logits.type == GgmlType::F32 && ids.type == GgmlType::I32 && weights.type == GgmlType::F32,
        "moe_route types (logits f32, ids i32, weights f32)");
  check(ids.rows == n && weights.rows == n && weights.cols == k && k >= 1 && k <= E, "moe_route shapes");
  const bool gaps = track_route_gap_;
  if (gaps) route_gaps_.assign(static_cast<size_t>(n), std::numeric_limits<float>::infinity());
  auto one = [&](int64_t r, int thread) {
    float* p = thread_scratch(thread, static_cast<size_t>(E));
    softmax_row(kernels_.isa, trow(logits, r), p, E);
    int32_t* id = trow<int32_t>(ids, r);
    float* w = trow(weights, r);
    // top-k by selection: the largest remaining p, the lowest index among equals; a chosen
    // expert's p is then set to -1 (below every probability)
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = 0;
      for (int64_t e = 1; e < E; ++e)
        if (p[e] > p[best]) best = e;
      id[j] = static_cast<int32_t>(best);
      w[j] = p[best];
      p[best] = -1.0f;
    }
    if (gaps && k < E) {  // min_route_gap(): the k-th chosen expert's logit over the best one left out
      int64_t next = 0;
      for (int64_t e = 1; e < E; ++e)
        if (p[e] > p[next]) next = e;
      const float* l = trow(logits, r);
      route_gaps_[static_cast<size_t>(r)] = l[id[k - 1]] - l[next];
    }
    if (normalize) {
      double sum = 0.0;  // ggml_vec_sum_f32
      for (int64_t j = 0; j < k; ++j) sum += static_cast<double>(w[j]);
      const float s = std::max(static_cast<float>(sum), 6.103515625e-5f);  // ggml_clamp
      for (int64_t j = 0; j < k; ++j) w[j] = w[j] / s;
    }
    if (scale != 0.0f && scale != 1.0f)
      for (int64_t j = 0; j < k; ++j) w[j] *= scale;
  };
  if (n * E < 1 << 14) {
    for (int64_t r = 0; r < n; ++r) one(r, 0);
  } else {
    pool_.parallel_for(n, one);
  }
  if (gaps)
    for (const float g : route_gaps_) min_route_gap_ = std::min(min_route_gap_, g);
}

void CpuBackend::matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids,
                           const Tensor& y) {
  const int64_t n = ids.rows, k = ids.cols, cols = W.cols;
  check(x.type == GgmlType::F32 && y.type == GgmlType::F32 && ids.type == GgmlType::I32,
        "matmul_id types (activations f32, ids i32)");
  check(n_expert > 0 && W.rows % n_expert == 0, "matmul_id: weight rows not a multiple of n_expert");
  const int64_t m = W.rows / n_expert;
  const bool shared_x = x.rows == n;  // every slot of row r reads x[r]
  check(x.cols == cols && (shared_x || x.rows == n * k), "matmul_id: x must be [n, cols] or [n * k, cols]");
  check(y.cols == m && y.rows == n * k, "matmul_id: y must be [n * k, m]");
  if (n == 0) return;

  // 1. round the activation rows to the weight type's dot format
  const size_t act_stride = act_row_bytes(W.type, cols);
  const int64_t n_x = x.rows;
  uint8_t* act = act_scratch(act_stride * static_cast<size_t>(n_x));
  auto quant = [&](int64_t r, int) { kernels_.quantize_act(W.type, trow(x, r), act + act_stride * static_cast<size_t>(r), cols); };
  if (n_x == 1) {
    quant(0, 0);
  } else {
    pool_.parallel_for(n_x, quant);
  }

  // 2. group the slots by expert (ggml's order: rows, then slots), gather their activations
  const int64_t n_slots = n * k;
  const size_t gathered_bytes = act_stride * static_cast<size_t>(n_slots);
  const size_t out_bytes = static_cast<size_t>(n_slots * m) * sizeof(float);
  const size_t list_bytes = static_cast<size_t>(n_slots + 3 * n_expert + 1) * sizeof(int64_t);
  if (moe_buf_.size() < gathered_bytes + out_bytes + list_bytes + 64) moe_buf_.resize(gathered_bytes + out_bytes + list_bytes + 64);
  uint8_t* gathered = moe_buf_.data();
  float* out = reinterpret_cast<float*>(moe_buf_.data() + (gathered_bytes + 63) / 64 * 64);
  int64_t* start = reinterpret_cast<int64_t*>(reinterpret_cast<uint8_t*>(out) + out_bytes);  // [n_expert + 1]
  int64_t* fill = start + n_expert + 1;                                                        // [n_expert]
  int64_t* task_expert = fill + n_expert;                                                      // [n_expert]
  int64_t* slot_of = task_expert + n_expert;                                                   // [n_slots]
  std::fill(start, start + n_expert + 1, 0);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t* id = trow<int32_t>(ids, r);
    for (int64_t j = 0; j < k; ++j) {
      check(id[j] >= 0 && id[j] < n_expert, "matmul_id: expert id out of range");
      ++start[id[j] + 1];
    }
  }
  for (int64_t e = 0; e < n_expert; ++e) start[e + 1] += start[e];
  std::copy(start, start + n_expert, fill);
  for (int64_t r = 0; r < n; ++r) {
    const int32_t* id = trow<int32_t>(ids, r);
    for (int64_t j = 0; j < k; ++j) slot_of[fill[id[j]]++] = r * k + j;
  }
  for (int64_t g = 0; g < n_slots; ++g) {
    const int64_t src = shared_x ? slot_of[g] / k : slot_of[g];
    std::memcpy(gathered + act_stride * static_cast<size_t>(g), act + act_stride * static_cast<size_t>(src), act_stride);
  }

  // 3. tasks: chunks of each used expert's weight rows, each swept over all its rows
  int64_t n_used = 0;
  for (int64_t e = 0; e < n_expert; ++e)
    if (start[e + 1] > start[e]) task_expert[n_used++] = e;
  const int64_t threads = pool_.size();
  int64_t chunk = n <= 4 ? (n_used * m + threads * 8 - 1) / (threads * 8) : 64;
  chunk = std::min(m, std::max<int64_t>(16, (chunk + 15) / 16 * 16));
  const int64_t chunks_per_expert = (m + chunk - 1) / chunk;
  const int64_t act_block = 64;
  // the stack's repacked copy (weight_stack: each expert starts a group of rows)
  const Repacked* found = repacked(W);
  const Repacked* rp = found && found->stack ? found : nullptr;
  const uint8_t* Wp = static_cast<const uint8_t*>(rp && rp->planar ? rp->planar->data() : W.data);
  const size_t expert_bytes = rp ? cpu::repacked_bytes(W.type, cols, m) : 0;
  // experts on the file's mapped pages: the stats (their pages faulted in here, timed; checked
  // and advised already by the prefetch when it saw this routing: moe_experts_routed)
  if (expert_stats_on_ && !rp && in_mapped_file(W.data, W.nbytes()) && !finish_prefetched_experts(W, task_expert, n_used))
    account_mapped_experts(W, m, task_expert, n_used);
  pool_.parallel_for(n_used * chunks_per_expert, [&](int64_t t, int) {
    const int64_t e = task_expert[t / chunks_per_expert];
    const int64_t c = t % chunks_per_expert;
    const int64_t i0 = c * chunk, i1 = std::min(m, i0 + chunk);
    const uint8_t* We = Wp + W.stride * static_cast<size_t>(e * m);
    for (int64_t g0 = start[e]; g0 < start[e + 1]; g0 += act_block) {
      const int64_t nr = std::min(act_block, start[e + 1] - g0);
      const uint8_t* a = gathered + act_stride * static_cast<size_t>(g0);
      if (use_repacked(rp, W.type, start[e + 1] - start[e]))
        gemm_repacked(kernels_.isa, W.type, cols, static_cast<const uint8_t*>(rp->buf->data()) + expert_bytes * e, m, i0,
                      i1, a, act_stride, nr, out + g0 * m, m);
      else
        gemm_rows(W.type, cols, We, W.stride, i0, i1, a, act_stride, nr, out + g0 * m, m);
    }
  });

  // 4. scatter the products to their slots
  for (int64_t g = 0; g < n_slots; ++g)
    std::memcpy(trow(y, slot_of[g]), out + g * m, static_cast<size_t>(m) * sizeof(float));
}

void CpuBackend::account_mapped_experts(const Tensor& W, int64_t m, const int64_t* experts, int64_t n_used) {
  // The used experts' pages (ascending ids: ascending addresses), checked by mincore in runs
  // of nearby experts; a page shared by two used experts (a stack's experts need not start on
  // page boundaries) is counted with the lower id. The missing experts' ranges are all advised
  // (the kernel queues their reads together), then touched page by page: the time from the
  // advice to the last page is the stall, and the pool's products then read resident pages.
  constexpr int64_t kMergeGapPages = 256;  // mapped_pages.h: a call costs ~1000 pages' walk
  const auto c0 = std::chrono::steady_clock::now();
  expert_page_spans(static_cast<const uint8_t*>(W.data), W.stride * static_cast<size_t>(m),
                    std::span<const int64_t>(experts, static_cast<size_t>(n_used)), spans_);
  missing_.resize(spans_.size());
  missing_pages_each(spans_, kMergeGapPages, mincore_vec_, missing_.data());
  count_mapped_experts(spans_, missing_.data());
  const bool any = std::any_of(missing_.begin(), missing_.end(), [](int64_t x) { return x > 0; });
  const auto t0 = std::chrono::steady_clock::now();
  expert_stats_.check_seconds += std::chrono::duration<double>(t0 - c0).count();
  if (!any) return;
  for (size_t i = 0; i < spans_.size(); ++i)
    if (missing_[i] > 0) advise_willneed(spans_[i]);
  for (size_t i = 0; i < spans_.size(); ++i)
    if (missing_[i] > 0) touch_pages(spans_[i]);
  expert_stats_.stall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CpuBackend::moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                             const Tensor& out) {
  const int64_t n = out.rows, d = out.cols, k = weights.cols;
  const bool has_shared = shared.data != nullptr;
  check_moe_combine(experts, weights, shared, gate, out);
  auto one = [&](int64_t r, int) {
    const float* w = trow(weights, r);
    float* o = trow(out, r);
    const float* e0 = trow(experts, r * k);
    for (int64_t i = 0; i < d; ++i) o[i] = e0[i] * w[0];
    for (int64_t j = 1; j < k; ++j) {
      const float* e = trow(experts, r * k + j);
      const float wj = w[j];
      for (int64_t i = 0; i < d; ++i) {
        const float term = e[i] * wj;  // ggml_mul, rounded, then ggml_add
        o[i] = o[i] + term;
      }
    }
    if (has_shared) {
      const float* s = trow(shared, r);
      const float g = trow(gate, r)[0];
      for (int64_t i = 0; i < d; ++i) {
        const float term = s[i] * g;
        o[i] = o[i] + term;
      }
    }
  };
  if (n * d * k < 1 << 15) {
    for (int64_t r = 0; r < n; ++r) one(r, 0);
  } else {
    pool_.parallel_for(n, one);
  }
}

}  // namespace df::cpu
