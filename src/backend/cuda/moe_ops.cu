// The CUDA backend's mixture-of-experts ops (backend.h): the router on the device, the
// grouped expert products over matvec/'s kernels, and the weighted combine. matmul_id needs
// the routed ids on the host (which expert matrices to run, and for streamed experts which
// ones to bring into the cache): one download per routing, reused by the gate, up and down
// products of the same ids.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_cache.h"
#include "backend/cuda/ops/get_rows.cuh"
#include "backend/cuda/ops/moe.cuh"
#include "backend/cuda/packed_weights.h"

namespace df::cuda {
namespace {

void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cuda backend: ") + what);
}
float* fp(const Tensor& t) { return static_cast<float*>(t.data); }
int64_t fstride(const Tensor& t) { return static_cast<int64_t>(t.stride / sizeof(float)); }
size_t align256(size_t v) { return (v + 255) / 256 * 256; }

// Expert e's rows [e * m, (e + 1) * m) of a packed stack, as a weight of its own (not owning).
cudamv::PackedWeight expert_view(const cudamv::PackedWeight& P, int64_t e, int64_t m) {
  cudamv::PackedWeight v;
  v.type = P.type, v.cols = P.cols, v.rows = m;
  const size_t r0 = static_cast<size_t>(e * m);
  v.data = P.data + r0 * P.q_row_bytes;
  v.q_row_bytes = P.q_row_bytes, v.m_row_bytes = P.m_row_bytes;
  v.m_offset = P.m_offset + r0 * P.m_row_bytes - r0 * P.q_row_bytes;  // the meta plane of row r0
  v.bytes = (P.q_row_bytes + P.m_row_bytes) * static_cast<size_t>(m);
  v.tables = P.tables;
  return v;
}

// A streamed expert in a cache slot, in its own packed layout.
cudamv::PackedWeight slot_view(const ExpertStack& s, uint8_t* mem, const void* tables) {
  cudamv::PackedWeight v;
  v.type = s.type, v.cols = s.cols, v.rows = s.rows;
  v.data = mem;
  v.q_row_bytes = s.q_row_bytes, v.m_row_bytes = s.m_row_bytes;
  v.m_offset = s.q_row_bytes * static_cast<size_t>(s.rows);
  v.bytes = s.expert_bytes;
  v.tables = tables;
  return v;
}

}  // namespace

MoeBuffers::~MoeBuffers() {
  if (host_ids) cudaFreeHost(host_ids);
  if (dev) cudaFree(dev);
}

void CudaBackend::moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids,
                            const Tensor& weights) {
  const int64_t n = logits.rows, E = logits.cols, k = ids.cols;
  check(logits.type == GgmlType::F32 && ids.type == GgmlType::I32 && weights.type == GgmlType::F32,
        "moe_route types (logits f32, ids i32, weights f32)");
  check(ids.rows == n && weights.rows == n && weights.cols == k && k >= 1 && k <= E, "moe_route shapes");
  check(E <= kMoeMaxExperts, "moe_route: more experts than the kernel takes");
  check(ids.stride == static_cast<size_t>(k) * sizeof(int32_t) && weights.stride == static_cast<size_t>(k) * sizeof(float),
        "moe_route: ids and weights must be dense");
  ctx_->make_current();
  ++i32_epoch_;
  launch_moe_route(fp(logits), fstride(logits), n, E, k, normalize, scale, static_cast<int32_t*>(ids.data),
                   fp(weights), ctx_->stream());
}

const int32_t* CudaBackend::host_ids(const Tensor& ids) {
  MoeBuffers& b = *moe_;
  if (b.ids_of == ids.data && b.ids_rows == ids.rows && b.ids_cols == ids.cols && b.ids_epoch == i32_epoch_)
    return b.host_ids;
  check(!ctx_->capturing(), "matmul_id reads the routed ids on the host: it cannot run inside a graph capture");
  const size_t count = static_cast<size_t>(ids.rows * ids.cols);
  if (count > b.host_ids_n) {
    if (b.host_ids) cuda_check(cudaFreeHost(b.host_ids), "cudaFreeHost");
    b.host_ids = nullptr;
    b.host_ids_n = 0;
    const size_t want = std::max<size_t>(count, 4096);
    cuda_check(cudaHostAlloc(reinterpret_cast<void**>(&b.host_ids), want * sizeof(int32_t), cudaHostAllocDefault),
               "cudaHostAlloc(routed ids)");
    b.host_ids_n = want;
  }
  cuda_check(cudaMemcpyAsync(b.host_ids, ids.data, count * sizeof(int32_t), cudaMemcpyDeviceToHost, ctx_->stream()),
             "download of the routed ids");
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "download of the routed ids");
  b.ids_of = ids.data, b.ids_rows = ids.rows, b.ids_cols = ids.cols, b.ids_epoch = i32_epoch_;
  return b.host_ids;
}

void CudaBackend::matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
  const int64_t n = ids.rows, k = ids.cols, cols = W.cols;
  check(x.type == GgmlType::F32 && y.type == GgmlType::F32 && ids.type == GgmlType::I32,
        "matmul_id types (activations f32, ids i32)");
  check(n_expert > 0 && W.rows % n_expert == 0, "matmul_id: weight rows not a multiple of n_expert");
  const int64_t m = W.rows / n_expert;
  const bool shared_x = x.rows == n;  // every slot of row r reads x[r]
  check(x.cols == cols && (shared_x || x.rows == n * k), "matmul_id: x must be [n, cols] or [n * k, cols]");
  check(y.cols == m && y.rows == n * k, "matmul_id: y must be [n * k, m]");
  check(ids.stride == static_cast<size_t>(k) * sizeof(int32_t), "matmul_id: ids must be dense [n, k]");
  if (n == 0) return;
  ctx_->make_current();
  const ExpertStack* S = experts_ ? experts_->find(W.data) : nullptr;
  const cudamv::PackedWeight* P = S ? nullptr : &packed(W);
  check(!S || (S->n_expert == n_expert && S->rows == m), "matmul_id: n_expert differs from the stack's");
  const int32_t* id = host_ids(ids);
  const int64_t n_slots = n * k;
  for (int64_t i = 0; i < n_slots; ++i) check(id[i] >= 0 && id[i] < n_expert, "matmul_id: expert id out of range");

  // The slots grouped by expert (rows, then slots, as the CPU groups them).
  std::vector<int64_t> start(static_cast<size_t>(n_expert + 1), 0);
  for (int64_t i = 0; i < n_slots; ++i) ++start[static_cast<size_t>(id[i] + 1)];
  for (int64_t e = 0; e < n_expert; ++e) start[static_cast<size_t>(e + 1)] += start[static_cast<size_t>(e)];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  std::vector<int32_t> lists(static_cast<size_t>(2 * n_slots));  // [gathered row -> x row | -> y row]
  for (int64_t i = 0; i < n_slots; ++i) {
    const int64_t g = fill[static_cast<size_t>(id[i])]++;
    lists[static_cast<size_t>(g)] = static_cast<int32_t>(shared_x ? i / k : i);
    lists[static_cast<size_t>(n_slots + g)] = static_cast<int32_t>(i);
  }
  std::vector<int64_t> used;
  for (int64_t e = 0; e < n_expert; ++e)
    if (start[static_cast<size_t>(e + 1)] > start[static_cast<size_t>(e)]) used.push_back(e);

  // One row: each slot's x and y rows are used in place (no gather).
  const bool direct = n == 1 && x.stride == static_cast<size_t>(cols) * sizeof(float) &&
                      y.stride == static_cast<size_t>(m) * sizeof(float);
  float *xg = fp(x), *yg = fp(y);
  if (!direct) {
    const size_t list_b = align256(lists.size() * sizeof(int32_t));
    const size_t x_b = align256(static_cast<size_t>(n_slots * cols) * sizeof(float));
    const size_t need = list_b + x_b + static_cast<size_t>(n_slots * m) * sizeof(float);
    MoeBuffers& b = *moe_;
    if (need > b.dev_bytes) {
      check(!ctx_->capturing(), "matmul_id scratch grows inside a graph capture");
      cuda_check(cudaStreamSynchronize(ctx_->stream()), "matmul_id: synchronize before growing");
      if (b.dev) cuda_check(cudaFree(b.dev), "cudaFree(matmul_id scratch)");
      b.dev = nullptr;
      b.dev_bytes = 0;
      cuda_check(cudaMalloc(&b.dev, need), "cudaMalloc(matmul_id scratch)");
      b.dev_bytes = need;
    }
    auto* dl = static_cast<int32_t*>(b.dev);
    xg = reinterpret_cast<float*>(static_cast<uint8_t*>(b.dev) + list_b);
    yg = reinterpret_cast<float*>(static_cast<uint8_t*>(b.dev) + list_b + x_b);
    // pageable source: copied to staging before the call returns, so `lists` may go
    cuda_check(cudaMemcpyAsync(dl, lists.data(), lists.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                               ctx_->stream()),
               "upload of matmul_id's slot lists");
    launch_gather_rows_f32(fp(x), fstride(x), x.rows, cols, dl, n_slots, xg, cols, ctx_->stream());
  }
  // Expert e over its gathered rows [g0, g0 + c) (direct: the slot's own rows).
  auto run = [&](const cudamv::PackedWeight& V, int64_t e) {
    const int64_t g0 = start[static_cast<size_t>(e)], c = start[static_cast<size_t>(e + 1)] - g0;
    if (direct) {
      for (int64_t g = g0; g < g0 + c; ++g) {
        const int64_t xr = lists[static_cast<size_t>(g)], yr = lists[static_cast<size_t>(n_slots + g)];
        mul_packed(V, xg + xr * cols, cols, 1, yg + yr * m, m);
      }
      return;
    }
    mul_packed(V, xg + g0 * cols, cols, c, yg + g0 * m, m);  // <= 8 rows: the one-row bits per row
  };
  if (!S) {
    for (int64_t e : used) run(expert_view(*P, e, m), e);
  } else {
    // Streamed: groups of at most the cache's slots; a group's uploads are queued first, so
    // they overlap the products of the experts before them.
    const int64_t group = experts_->slots();
    for (size_t u0 = 0; u0 < used.size(); u0 += static_cast<size_t>(group)) {
      const size_t u1 = std::min(used.size(), u0 + static_cast<size_t>(group));
      std::vector<std::pair<uint8_t*, int>> held;
      for (size_t u = u0; u < u1; ++u) {
        int slot = 0;
        uint8_t* mem = experts_->acquire(*S, used[u], &slot);
        held.emplace_back(mem, slot);
      }
      for (size_t u = u0; u < u1; ++u) {
        experts_->wait_ready(held[u - u0].second, ctx_->stream());
        run(slot_view(*S, held[u - u0].first, weights_->tables.tables()), used[u]);
      }
      experts_->release_all(ctx_->stream());
    }
  }
  if (!direct) {
    const auto* dl = static_cast<const int32_t*>(moe_->dev);
    launch_scatter_rows_f32(yg, m, n_slots, m, dl + n_slots, fp(y), fstride(y), ctx_->stream());
  }
}

void CudaBackend::moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                              const Tensor& out) {
  const int64_t n = out.rows, d = out.cols, k = weights.cols;
  const bool has_shared = shared.data != nullptr;
  check_moe_combine(experts, weights, shared, gate, out);
  ctx_->make_current();
  launch_moe_combine(fp(experts), fstride(experts), fp(weights), fstride(weights), k,
                     has_shared ? fp(shared) : nullptr, has_shared ? fstride(shared) : 0,
                     has_shared ? fp(gate) : nullptr, has_shared ? fstride(gate) : 0, fp(out), fstride(out), n, d,
                     ctx_->stream());
}

ExpertCacheStats CudaBackend::expert_cache_stats() const { return experts_ ? experts_->stats() : ExpertCacheStats{}; }

void CudaBackend::reset_expert_cache_stats() {
  if (experts_) experts_->reset_stats();
}

}  // namespace df::cuda
