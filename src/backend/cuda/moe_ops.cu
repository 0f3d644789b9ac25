// The CUDA backend's mixture-of-experts ops (backend.h): the router on the device, the
// grouped expert products over matvec/'s kernels, and the weighted combine.
// matmul_id of up to 8 rows (decode, speculative verify) reads the routed ids on the device:
// one matvec launch over the n * k slots, each slot's blocks taking their expert's planes
// from the stack's device table (matvec.cuh MatvecFusion::ids), so no host round trip and
// the step records into a CUDA graph. A slot's bits are those of the matvec of its expert
// alone. Rows routed to the same expert read it once per slot: for decode (one row, k
// distinct experts) that is each expert once; a verify batch re-reads the experts its rows
// share. More rows (prefill) group the slots by expert on the device (no host round trip) and
// run chunks of up to 8 rows of one expert in one launch, each chunk reading its expert once
// (CudaOptions::moe_legacy: the ids downloaded, one launch per used expert), or with
// CudaOptions::moe_gemm more than 16 rows run the grouped tensor-core GEMM (gemm/grouped.cuh)
// over the same device grouping: tiles of 32 slots of one expert, one launch a product.
#include <algorithm>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "backend/cuda/backend_check.h"
#include "backend/cuda/context.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/expert_cache.h"
#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/gemm/grouped.cuh"
#include "backend/cuda/matvec/layout.cuh"
#include "backend/cuda/op_profile.h"
#include "backend/cuda/ops/get_rows.cuh"
#include "backend/cuda/ops/moe.cuh"
#include "backend/cuda/ops/rms_norm.cuh"
#include "backend/cuda/packed_weights.h"

namespace df::cuda {
namespace {

float* fp(const Tensor& t) { return static_cast<float*>(t.data); }
int64_t fstride(const Tensor& t) { return static_cast<int64_t>(t.stride / sizeof(float)); }
size_t align256(size_t v) { return (v + 255) / 256 * 256; }
// The router kernel: one warp per row with CudaOptions::moe_warp_route (not --moe-legacy), else
// the stop-20 block per row (the same bits).
MoeRouteKernel route_kernel(const CudaOptions& o) {
  return o.moe_warp_route && !o.moe_legacy ? MoeRouteKernel::warp : MoeRouteKernel::block;
}

// Profile entries of the routed products (bench --profile): "q4_k 512x2048 x9" (one expert's
// rows x cols, the call's slots), the bytes of the slots' experts (each slot of a call of up to
// 8 rows reads its own; more rows: 0, the chunks' count is known on the device only).
std::string routed_shape(const Tensor& W, int64_t n_expert, int64_t slots) {
  return std::string(type_name(W.type)) + " " + std::to_string(W.rows / n_expert) + "x" + std::to_string(W.cols) +
         " x" + std::to_string(slots);
}
uint64_t routed_bytes(const Tensor& W, int64_t n_expert, int64_t slots) {
  return static_cast<uint64_t>(row_bytes(W.type, W.cols)) * static_cast<uint64_t>(W.rows / n_expert) *
         static_cast<uint64_t>(slots);
}

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

// The table of a resident stack's experts (built once, at weight_stack).
const uint8_t** make_expert_table(const cudamv::PackedWeight& P, int64_t n_expert, int64_t m) {
  std::vector<const uint8_t*> t(static_cast<size_t>(2 * n_expert));
  for (int64_t e = 0; e < n_expert; ++e) {
    const cudamv::PackedWeight v = expert_view(P, e, m);
    t[static_cast<size_t>(e)] = v.data;
    t[static_cast<size_t>(n_expert + e)] = v.data + v.m_offset;
  }
  const uint8_t** d = nullptr;
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&d), t.size() * sizeof(void*)), "cudaMalloc(expert table)");
  cuda_check(cudaMemcpy(d, t.data(), t.size() * sizeof(void*), cudaMemcpyHostToDevice), "upload of an expert table");
  return d;
}

MoeBuffers::~MoeBuffers() {
  if (host_ids) cudaFreeHost(host_ids);
  if (dev) cudaFree(dev);
  if (grp) cudaFree(grp);
  if (fused) cudaFree(fused);
  for (auto& [key, t] : ext_tables) cudaFree(const_cast<uint8_t**>(t));
  if (gxy) cudaFree(gxy);
  if (tiles) cudaFree(tiles);
  if (xh) cudaFree(xh);
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
  OpScope ps(prof_.get(), "moe_route");
  ++i32_epoch_;
  launch_moe_route(fp(logits), fstride(logits), n, E, k, normalize, scale, static_cast<int32_t*>(ids.data),
                   fp(weights), ctx_->stream(), route_kernel(opt_), small_pdl_);
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
  ++b.downloads;
  return b.host_ids;
}

const uint8_t* const* CudaBackend::expert_table(const Tensor& W, int64_t n_expert, const ExpertStack** stack) {
  const ExpertStack* S = experts_ ? experts_->find(W.data) : nullptr;
  *stack = S;
  if (S) {
    check(S->n_expert == n_expert, "matmul_id: n_expert differs from the stack's");
    check(!ctx_->capturing() || experts_->ready(), "matmul_id: the expert cache is first used inside a graph capture");
    experts_->ensure_ready();
    return S->table;
  }
  const auto it = weights_->expert_tables.find(W.data);
  check(it != weights_->expert_tables.end(), "matmul_id: the matrix must be a stack from weight_stack()");
  return it->second;
}

void CudaBackend::bring_experts(std::initializer_list<const Tensor*> stacks, const Tensor& ids, bool lookup) {
  if (!experts_ || !experts_->from_file()) return;
  const ExpertStack* S[4];
  int n = 0;
  for (const Tensor* t : stacks)
    if (const ExpertStack* s = experts_->find(t->data); s && n < 4) S[n++] = s;
  if (n == 0) return;
  check(ids.type == GgmlType::I32 && ids.stride == static_cast<size_t>(ids.cols) * sizeof(int32_t),
        "matmul_id: ids must be dense i32");
  const int32_t* id = host_ids(ids);  // a sync, once per routing
  experts_->acquire(S, n, id, ids.rows * ids.cols, lookup, moe_->downloads);
}

// One expert's geometry (its data pointer is never read: the table gives the planes).
void CudaBackend::expert_geometry(cudamv::PackedWeight& p, const ExpertStack* S, const Tensor& W, int64_t m) const {
  p.type = W.type, p.cols = W.cols, p.rows = m;
  if (S) {
    p.q_row_bytes = S->q_row_bytes, p.m_row_bytes = S->m_row_bytes;
    p.data = S->host_dev;
  } else {
    const cudamv::PackedWeight& P = packed(W);
    p.q_row_bytes = P.q_row_bytes, p.m_row_bytes = P.m_row_bytes;
    p.data = P.data;
  }
  // int8 x (dp4a) for the experts as for every decode matvec of these formats, resident or
  // streamed alike (the bits never depend on the placement); moe_legacy: f32 x (stop 19).
  p.int8_x = !opt_.moe_legacy && weights_->tables.int8_x() && cudamv::int8_x_supported(W.type, W.cols);
  p.pdl = weights_->tables.pdl();
  p.tables = weights_->tables.tables();
}

// Scratch *p of at least `want` bytes (grown outside graph captures only, after a synchronize).
void CudaBackend::grow_moe_scratch(void** p, size_t* have, size_t want, const char* what) {
  if (want <= *have) return;
  check(!ctx_->capturing(), "matmul_id scratch grows inside a graph capture");
  cuda_check(cudaStreamSynchronize(ctx_->stream()), "matmul_id: synchronize before growing");
  if (*p) cuda_check(cudaFree(*p), "cudaFree(matmul_id scratch)");
  *p = nullptr;
  *have = 0;
  cuda_check(cudaMalloc(p, want), what);
  *have = want;
}

// The grouping of a routing (ops/moe.cuh launch_moe_group): once per ids tensor at this I32 epoch.
int32_t* CudaBackend::moe_grouping(const Tensor& ids, int64_t n_expert, int64_t C) {
  const int64_t n = ids.rows, k = ids.cols, n_slots = n * k;
  MoeBuffers& b = *moe_;
  const size_t gn = static_cast<size_t>(n_expert + C + 16 * C + n_slots);
  if (!(b.grp_of == ids.data && b.grp_rows == n && b.grp_cols == k && b.grp_experts == n_expert &&
        b.grp_epoch == i32_epoch_)) {
    size_t have = b.grp_n * sizeof(int32_t);
    grow_moe_scratch(reinterpret_cast<void**>(&b.grp), &have, gn * sizeof(int32_t), "cudaMalloc(moe grouping)");
    b.grp_n = have / sizeof(int32_t);
    int32_t* g = b.grp;
    launch_moe_group(static_cast<const int32_t*>(ids.data), n_slots, n_expert, C, k, g, g + n_expert,
                     g + n_expert + C, g + n_expert + 9 * C, g + n_expert + 17 * C, ctx_->stream());
    b.grp_of = ids.data, b.grp_rows = n, b.grp_cols = k, b.grp_experts = n_expert, b.grp_epoch = i32_epoch_;
    b.grp_chunks = C;
    ++b.grp_serial;
  }
  return b.grp;
}

bool CudaBackend::matmul_id_grouped(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids,
                                    const Tensor& y) {
  const int64_t n = ids.rows, k = ids.cols, cols = W.cols, m = W.rows / n_expert, n_slots = n * k;
  const bool shared_x = x.rows == n;
  const int64_t C = moe_max_chunks(n_slots, n_expert);
  auto a16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  if (opt_.moe_legacy || C > 65535 || cols % 4 != 0 || m % 4 != 0 || fstride(x) % 4 != 0 || !a16(x.data))
    return false;
  const ExpertStack* S = nullptr;
  cudamv::MatvecFusion fu;
  fu.table[0] = expert_table(W, n_expert, &S);
  cudamv::PackedWeight proto;
  expert_geometry(proto, S, W, m);
  MoeBuffers& b = *moe_;
  cudaStream_t st = ctx_->stream();
  int32_t* chunk_e = moe_grouping(ids, n_expert, C) + n_expert;
  const int32_t* slot_of = chunk_e + C;
  const int32_t* x_of = chunk_e + 9 * C;
  const int32_t* pos_of = chunk_e + 17 * C;
  const size_t xg_b = align256(static_cast<size_t>(8 * C * cols) * sizeof(float));
  grow_moe_scratch(&b.gxy, &b.gxy_bytes, xg_b + static_cast<size_t>(8 * C * m) * sizeof(float),
                   "cudaMalloc(moe gathered rows)");
  float* xg = static_cast<float*>(b.gxy);
  float* yg = reinterpret_cast<float*>(static_cast<uint8_t*>(b.gxy) + xg_b);
  launch_moe_gather_padded(fp(x), fstride(x), cols, shared_x ? x_of : slot_of, chunk_e, C, xg, st);
  fu.ids = chunk_e;
  fu.n_slots = static_cast<int>(C), fu.n_expert = static_cast<int>(n_expert), fu.x_div = 1;
  fu.routed_pdl = opt_.moe_pdl && !S;  // resident stacks only: what CudaOps.MoePdlIsThePlainBits checks
  if (!cudamv::matvec_fused(proto, xg, yg, cudamv::kMaxRows, fu, st)) return false;
  launch_gather_rows_f32(yg, m, 8 * C, m, pos_of, n_slots, fp(y), fstride(y), st);
  if (S) experts_->count(*S, chunk_e, C, st);  // one read of its expert per chunk
  return true;
}

// matmul_id (Wu null) or matmul_id_swiglu (y = silu(Wg x) * (Wu x)) of more than
// CudaOptions::moe_gemm_min_rows (at least 8) rows through the grouped tensor-core GEMM
// (gemm/grouped.cuh) over the device grouping: x once in f16, one launch, each tile's rows read
// from x and written to their slots of y in place (no gathered copies). Resident stacks of a
// GEMM format only; false (nothing written to y) otherwise.
bool CudaBackend::matmul_id_gemm(const Tensor& Wg, const Tensor* Wu, int64_t n_expert, const Tensor& x,
                                 const Tensor& ids, const Tensor& y) {
  const int64_t n = ids.rows, k = ids.cols, cols = Wg.cols, m = Wg.rows / n_expert, n_slots = n * k;
  const bool shared_x = x.rows == n;
  if (!opt_.moe_gemm || opt_.moe_legacy || n <= std::max<int64_t>(cudamv::kMaxRows, opt_.moe_gemm_min_rows) ||
      cols % gemm::kColsStep != 0 ||
      !cudamv::layout_supported(Wg.type) || fstride(x) % 4 != 0 || (reinterpret_cast<uintptr_t>(x.data) & 15u) != 0)
    return false;
  if (Wu && (Wu->type != Wg.type || Wu->rows != Wg.rows || Wu->cols != cols)) return false;
  const int64_t C = moe_max_chunks(n_slots, n_expert), T = gemm::grouped_max_tiles(n_slots, n_expert);
  if (C > 65535 || T > 65535) return false;
  if (experts_ && (experts_->find(Wg.data) || (Wu && experts_->find(Wu->data)))) return false;  // streamed
  const ExpertStack* S = nullptr;
  gemm::GroupedArgs g{};
  g.table[0] = expert_table(Wg, n_expert, &S);
  g.table[1] = Wu ? expert_table(*Wu, n_expert, &S) : nullptr;
  const cudamv::PackedWeight& P = packed(Wg);
  if (Wu) {
    const cudamv::PackedWeight& Pu = packed(*Wu);
    if (Pu.q_row_bytes != P.q_row_bytes || Pu.m_row_bytes != P.m_row_bytes) return false;
  }
  MoeBuffers& b = *moe_;
  cudaStream_t st = ctx_->stream();
  int32_t* grp = moe_grouping(ids, n_expert, C);
  const int32_t* slot_of = grp + n_expert + C;
  const int32_t* x_of = grp + n_expert + 9 * C;
  if (static_cast<size_t>(T) * sizeof(int4) > b.tiles_bytes) b.tiles_serial = ~0ull;  // a new buffer: rebuild
  grow_moe_scratch(&b.tiles, &b.tiles_bytes, static_cast<size_t>(T) * sizeof(int4), "cudaMalloc(moe gemm tiles)");
  auto* tiles = static_cast<int4*>(b.tiles);
  if (b.tiles_serial != b.grp_serial) {  // once per grouping
    gemm::launch_grouped_tiles(grp, n_expert, T, tiles, st);
    b.tiles_serial = b.grp_serial;
  }
  grow_moe_scratch(&b.xh, &b.xh_bytes, static_cast<size_t>(x.rows * cols) * sizeof(uint16_t),
                   "cudaMalloc(moe gemm f16 x)");
  auto* xh = static_cast<uint16_t*>(b.xh);
  gemm::convert_x_f16(fp(x), fstride(x), x.rows, cols, xh, st);
  g.type = Wg.type;
  g.n_expert = n_expert;
  g.q_row_bytes = P.q_row_bytes, g.m_row_bytes = P.m_row_bytes;
  g.rows = m, g.cols = cols;
  g.tables = static_cast<const cudamv::DevTables*>(weights_->tables.tables());
  g.tiles = tiles, g.max_tiles = T;
  g.x_row = shared_x ? x_of : slot_of;
  g.y_row = slot_of;
  g.x = reinterpret_cast<const __half*>(xh);
  g.y = fp(y), g.ys = fstride(y);
  return gemm::grouped_gemm(g, st);
}

bool CudaBackend::matmul_id_device(const Tensor& Wg, const Tensor* Wu, int64_t n_expert, const Tensor& x,
                                   const Tensor& ids, const Tensor& y) {
  const int64_t n = ids.rows, k = ids.cols, cols = Wg.cols, m = Wg.rows / n_expert;
  const bool shared_x = x.rows == n;
  if (n > cudamv::kMaxRows || n * k > 65535 || x.stride != static_cast<size_t>(cols) * sizeof(float) ||
      y.stride != static_cast<size_t>(m) * sizeof(float) || (reinterpret_cast<uintptr_t>(x.data) & 15u) != 0)
    return false;
  const ExpertStack* Sg = nullptr;
  const ExpertStack* Su = nullptr;
  cudamv::MatvecFusion fu;
  fu.table[0] = expert_table(Wg, n_expert, &Sg);
  if (Wu) {
    fu.table[1] = expert_table(*Wu, n_expert, &Su);
    check(Wu->cols == cols && Wu->rows == Wg.rows && Wu->type == Wg.type && !Sg == !Su,
          "matmul_id_swiglu: gate and up stacks differ in shape, type or placement");
  }
  cudamv::PackedWeight proto, proto_u;
  expert_geometry(proto, Sg, Wg, m);
  if (Wu) {
    expert_geometry(proto_u, Su, *Wu, m);
    fu.more[0] = &proto_u;
    fu.swiglu = true;
  }
  fu.ids = static_cast<const int32_t*>(ids.data);
  fu.n_slots = static_cast<int>(n * k), fu.n_expert = static_cast<int>(n_expert);
  fu.x_div = shared_x ? static_cast<int>(k) : 1;
  // Streamed stacks: plain unpipelined launches unless CudaOptions::moe_streamed_fused
  // (CudaOps.StreamedFusedIsTheResidentBits checks them with it).
  const bool fast = !Sg || opt_.moe_streamed_fused;
  fu.routed_pdl = opt_.moe_pdl && fast;
  fu.routed_pipe = fast ? opt_.moe_pipe : 0;
  if (!cudamv::matvec_fused(proto, fp(x), fp(y), 1, fu, ctx_->stream())) return false;
  if (Sg) experts_->count(*Sg, fu.ids, n * k, ctx_->stream());
  if (Su) experts_->count(*Su, fu.ids, n * k, ctx_->stream());
  return true;
}

void CudaBackend::matmul_id_swiglu(const Tensor& Wg, const Tensor& Wu, int64_t n_expert, const Tensor& x,
                                   const Tensor& ids, const Tensor& gate, const Tensor& up) {
  const int64_t n = ids.rows;
  check_matmul_id(Wg, n_expert, x, ids, gate);
  check_matmul_id(Wu, n_expert, x, ids, up);
  ctx_->make_current();
  if (n == 0) return;
  OpScope ps(prof_.get(), "matmul_id_swiglu", n <= cudamv::kMaxRows ? 2 * routed_bytes(Wg, n_expert, n * ids.cols) : 0,
             [&] { return routed_shape(Wg, n_expert, n * ids.cols); });
  bring_experts({&Wg, &Wu}, ids, true);  // the file tier: both stacks' experts into slots first
  if (fuse_ && matmul_id_device(Wg, &Wu, n_expert, x, ids, gate)) return;
  if (fuse_ && matmul_id_gemm(Wg, &Wu, n_expert, x, ids, gate)) return;
  Backend::matmul_id_swiglu(Wg, Wu, n_expert, x, ids, gate, up);
}

void CudaBackend::check_matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids,
                                  const Tensor& y) const {
  const int64_t n = ids.rows, k = ids.cols, cols = W.cols;
  check(x.type == GgmlType::F32 && y.type == GgmlType::F32 && ids.type == GgmlType::I32,
        "matmul_id types (activations f32, ids i32)");
  check(n_expert > 0 && W.rows % n_expert == 0, "matmul_id: weight rows not a multiple of n_expert");
  const int64_t m = W.rows / n_expert;
  check(x.cols == cols && (x.rows == n || x.rows == n * k), "matmul_id: x must be [n, cols] or [n * k, cols]");
  check(y.cols == m && y.rows == n * k, "matmul_id: y must be [n * k, m]");
  check(ids.stride == static_cast<size_t>(k) * sizeof(int32_t), "matmul_id: ids must be dense [n, k]");
}

void CudaBackend::matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) {
  check_matmul_id(W, n_expert, x, ids, y);
  const int64_t n = ids.rows, k = ids.cols, cols = W.cols, m = W.rows / n_expert;
  const bool shared_x = x.rows == n;  // every slot of row r reads x[r]
  if (n == 0) return;
  ctx_->make_current();
  OpScope ps(prof_.get(), "matmul_id", n <= cudamv::kMaxRows ? routed_bytes(W, n_expert, n * k) : 0,
             [&] { return routed_shape(W, n_expert, n * k); });
  if (experts_ && !ctx_->capturing()) experts_->maintain();
  bring_experts({&W}, ids, true);  // the file tier: its experts into slots first
  if (matmul_id_device(W, nullptr, n_expert, x, ids, y)) return;
  if (matmul_id_gemm(W, nullptr, n_expert, x, ids, y)) return;
  if (matmul_id_grouped(W, n_expert, x, ids, y)) return;

  // Many rows: the ids on the host, the rows grouped by expert, each used expert run once.
  const ExpertStack* S = nullptr;
  expert_table(W, n_expert, &S);  // checks the stack (and readies the cache)
  const cudamv::PackedWeight* P = S ? nullptr : &packed(W);
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
  float* xg = reinterpret_cast<float*>(static_cast<uint8_t*>(b.dev) + list_b);
  float* yg = reinterpret_cast<float*>(static_cast<uint8_t*>(b.dev) + list_b + x_b);
  // pageable source: copied to staging before the call returns, so `lists` may go
  cuda_check(cudaMemcpyAsync(dl, lists.data(), lists.size() * sizeof(int32_t), cudaMemcpyHostToDevice, ctx_->stream()),
             "upload of matmul_id's slot lists");
  launch_gather_rows_f32(fp(x), fstride(x), x.rows, cols, dl, n_slots, xg, cols, ctx_->stream());
  for (int64_t e = 0; e < n_expert; ++e) {
    const int64_t g0 = start[static_cast<size_t>(e)], c = start[static_cast<size_t>(e + 1)] - g0;
    if (c == 0) continue;
    if (S) {  // streamed: from its slot, or read in place from host memory
      bool resident = false;
      const uint8_t* mem = experts_->planes(*S, e, &resident);
      experts_->count_host(*S, resident);
      mul_packed(slot_view(*S, const_cast<uint8_t*>(mem), weights_->tables.tables()), xg + g0 * cols, cols, c,
                 yg + g0 * m, m);
    } else {
      mul_packed(expert_view(*P, e, m), xg + g0 * cols, cols, c, yg + g0 * m, m);  // <= 8 rows: one-row bits
    }
  }
  launch_scatter_rows_f32(yg, m, n_slots, m, dl + n_slots, fp(y), fstride(y), ctx_->stream());
}

void CudaBackend::moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                              const Tensor& out) {
  const int64_t n = out.rows, d = out.cols, k = weights.cols;
  const bool has_shared = shared.data != nullptr;
  check_moe_combine(experts, weights, shared, gate, out);
  ctx_->make_current();
  OpScope ps(prof_.get(), "moe_combine");
  launch_moe_combine(fp(experts), fstride(experts), fp(weights), fstride(weights), k,
                     has_shared ? fp(shared) : nullptr, has_shared ? fstride(shared) : 0,
                     has_shared ? fp(gate) : nullptr, has_shared ? fstride(gate) : 0, fp(out), fstride(out), n, d,
                     ctx_->stream());
}

void CudaBackend::moe_combine_add(const Tensor& experts, const Tensor& weights, const Tensor& shared,
                                  const Tensor& gate, const Tensor& out, const Tensor& x) {
  if (opt_.moe_legacy || !fuse_) {
    Backend::moe_combine_add(experts, weights, shared, gate, out, x);
    return;
  }
  const int64_t n = out.rows, d = out.cols, k = weights.cols;
  const bool has_shared = shared.data != nullptr;
  check_moe_combine(experts, weights, shared, gate, out);
  check(x.type == GgmlType::F32 && x.rows == n && x.cols == d, "moe_combine_add: x must be [n, d] f32");
  ctx_->make_current();
  OpScope ps(prof_.get(), "moe_combine_add");
  launch_moe_combine_add(fp(experts), fstride(experts), fp(weights), fstride(weights), k,
                         has_shared ? fp(shared) : nullptr, has_shared ? fstride(shared) : 0,
                         has_shared ? fp(gate) : nullptr, has_shared ? fstride(gate) : 0, fp(x), fstride(x), n, d,
                         ctx_->stream());
}

// Stack W's expert table with a shared expert Ws appended as expert E (2 * (E + 1) pointers:
// quant planes of 0 .. E, then meta planes); built once per pair, outside graph captures.
// Null where Ws is not laid out as one of W's experts.
const uint8_t* const* CudaBackend::extended_table(const Tensor& W, const Tensor& Ws, int64_t n_expert, int64_t m) {
  MoeBuffers& b = *moe_;
  const auto key = std::make_pair(static_cast<const void*>(W.data), static_cast<const void*>(Ws.data));
  const auto it = b.ext_tables.find(key);
  if (it != b.ext_tables.end()) return it->second;
  if (ctx_->capturing()) return nullptr;
  const cudamv::PackedWeight& P = packed(W);
  const cudamv::PackedWeight* Q = find_packed(Ws);
  if (!Q || Q->type != P.type || Q->cols != P.cols || Q->rows != m || Q->q_row_bytes != P.q_row_bytes ||
      Q->m_row_bytes != P.m_row_bytes)
    return nullptr;
  const int64_t E1 = n_expert + 1;
  std::vector<const uint8_t*> t(static_cast<size_t>(2 * E1));
  for (int64_t e = 0; e < n_expert; ++e) {
    const cudamv::PackedWeight v = expert_view(P, e, m);
    t[static_cast<size_t>(e)] = v.data;
    t[static_cast<size_t>(E1 + e)] = v.data + v.m_offset;
  }
  t[static_cast<size_t>(n_expert)] = Q->data;
  t[static_cast<size_t>(E1 + n_expert)] = Q->data + Q->m_offset;
  const uint8_t** d = nullptr;
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&d), t.size() * sizeof(void*)), "cudaMalloc(extended expert table)");
  cuda_check(cudaMemcpy(d, t.data(), t.size() * sizeof(void*), cudaMemcpyHostToDevice), "upload of an expert table");
  b.ext_tables.emplace(key, d);
  return d;
}

// The whole expert part in 4 launches for 1..8 rows with resident stacks and a shared expert
// of the routed experts' shape: the router's top-k plus the shared expert as slot k (id E of
// the extended tables, weight its sigmoid gate); gate/up of all k + 1 slots with the norm in
// the prologue and SwiGLU in the epilogue; down of the k + 1 slots; the combine (slot order:
// the shared expert last, as moe_combine adds it) with the residual add. Each slot's bits are
// those of its matvec alone, so x gets the bits of moe_experts_residual's unfused sequence
// with the one-warp-per-row norm (below). False: not taken (nothing written but private scratch).
bool CudaBackend::moe_experts_fused(const MoeExperts& a, const Tensor& x, const Tensor& norm, float eps) {
  const int64_t n = x.rows, dim = x.cols, E = a.n_expert, k = a.ids.cols;
  if (!a.shexp_gate.data || n < 1 || n > cudamv::kMaxRows || E < 1 || E + 1 > kMoeMaxExperts ||
      n * (k + 1) > 65535 || a.gate_exps.rows % E != 0)
    return false;
  const int64_t m = a.gate_exps.rows / E;
  const Tensor &G = a.gate_exps, &U = a.up_exps, &Dn = a.down_exps;
  const Tensor &SG = a.shexp_gate, &SU = a.shexp_up, &SD = a.shexp_down;
  // Streamed stacks (all three): one row with CudaOptions::moe_streamed_fused, the shared
  // expert outside the cache's tables (MatvecFusion::extra), the uses counted after the launches.
  // Not the file tier: there an expert outside the slots has no planes (null table entries)
  // until bring_experts reads the routed ids on the host and loads it, and the routing here
  // stays on the device (taking it read the null planes: cudaErrorIllegalAddress, stop 42).
  const ExpertStack* Sg = experts_ ? experts_->find(G.data) : nullptr;
  const ExpertStack* Su = experts_ ? experts_->find(U.data) : nullptr;
  const ExpertStack* Sd = experts_ ? experts_->find(Dn.data) : nullptr;
  const bool streamed = Sg || Su || Sd;
  if (streamed && (!opt_.moe_streamed_fused || n != 1 || !Sg || !Su || !Sd || experts_->from_file())) return false;
  if (G.type != U.type || SG.type != G.type || SU.type != U.type || SD.type != Dn.type || G.cols != dim ||
      U.cols != dim || U.rows != G.rows || SG.rows != m || SU.rows != m || SG.cols != dim || SU.cols != dim ||
      Dn.rows != E * dim || Dn.cols != m || SD.rows != dim || SD.cols != m)
    return false;
  auto a16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  if (x.type != GgmlType::F32 || x.stride != static_cast<size_t>(dim) * sizeof(float) || !a16(x.data) ||
      norm.type != GgmlType::F32 || norm.cols != dim || a.logits.type != GgmlType::F32 || a.logits.rows != n ||
      a.logits.cols != E || a.sh_g.type != GgmlType::F32 || a.sh_g.rows != n || m % 4 != 0)
    return false;
  const cudamv::PackedWeight* xg = nullptr;  // streamed: the shared expert's matrices (id E)
  const cudamv::PackedWeight* xu = nullptr;
  const cudamv::PackedWeight* xd = nullptr;
  const uint8_t* const* tg = nullptr;
  const uint8_t* const* tu = nullptr;
  const uint8_t* const* td = nullptr;
  if (streamed) {
    xg = find_packed(SG), xu = find_packed(SU), xd = find_packed(SD);
    auto fits = [](const cudamv::PackedWeight* P, const ExpertStack* S) {
      return P && P->type == S->type && P->cols == S->cols && P->rows == S->rows && P->q_row_bytes == S->q_row_bytes &&
             P->m_row_bytes == S->m_row_bytes;
    };
    if (!fits(xg, Sg) || !fits(xu, Su) || !fits(xd, Sd)) return false;
    if (ctx_->capturing() && !experts_->ready()) return false;
    if (!ctx_->capturing()) experts_->maintain();  // as an eager matmul_id call does
    const ExpertStack* S = nullptr;
    tg = expert_table(G, E, &S), tu = expert_table(U, E, &S), td = expert_table(Dn, E, &S);
  } else {
    tg = extended_table(G, SG, E, m);
    tu = extended_table(U, SU, E, m);
    td = extended_table(Dn, SD, E, dim);
  }
  if (!tg || !tu || !td) return false;
  // Private scratch for 8 rows: ids, weights [8, k + 1], gate [8 (k + 1), m], down [8 (k + 1), dim].
  MoeBuffers& b = *moe_;
  const int64_t slots = cudamv::kMaxRows * (k + 1);
  const size_t ids_b = align256(static_cast<size_t>(slots) * sizeof(int32_t));
  const size_t g_b = align256(static_cast<size_t>(slots * m) * sizeof(float));
  const size_t need = 2 * ids_b + g_b + static_cast<size_t>(slots * dim) * sizeof(float);
  cudaStream_t st = ctx_->stream();
  if (need > b.fused_bytes) {
    if (ctx_->capturing()) return false;
    cuda_check(cudaStreamSynchronize(st), "moe: synchronize before growing");
    if (b.fused) cuda_check(cudaFree(b.fused), "cudaFree(moe scratch)");
    b.fused = nullptr;
    b.fused_bytes = 0;
    cuda_check(cudaMalloc(&b.fused, need), "cudaMalloc(moe scratch)");
    b.fused_bytes = need;
  }
  auto* base = static_cast<uint8_t*>(b.fused);
  auto* ids1 = reinterpret_cast<int32_t*>(base);
  auto* w1 = reinterpret_cast<float*>(base + ids_b);
  auto* g1 = reinterpret_cast<float*>(base + 2 * ids_b);
  auto* d1 = reinterpret_cast<float*>(base + 2 * ids_b + g_b);
  cudamv::PackedWeight pg, pu, pd;
  expert_geometry(pg, Sg, G, m);
  expert_geometry(pu, Su, U, m);
  expert_geometry(pd, Sd, Dn, dim);
  // The launches' experts: E + 1 in the extended tables, or E in the cache's and the shared one
  // outside them (id E).
  const int n_table = static_cast<int>(streamed ? E : E + 1);
  // Profile entries (bench --profile): the four launches apart; the expert products' shapes
  // "q4_k 512x2048 x9" with the k + 1 slots' bytes.
  const int64_t slots1 = n * (k + 1);
  {
    OpScope ps(prof_.get(), "moe_route");
    launch_moe_route_extra(fp(a.logits), fstride(a.logits), n, E, k, a.normalize, a.scale, fp(a.sh_g),
                           fstride(a.sh_g), ids1, w1, st, route_kernel(opt_), small_pdl_);
  }
  ++i32_epoch_;
  OpScope ps_gu(prof_.get(), "moe_experts_gate_up", 2 * routed_bytes(G, E, slots1),
                [&] { return routed_shape(G, E, slots1); });
  cudamv::MatvecFusion fu;
  fu.more[0] = &pu;
  fu.swiglu = true;
  fu.table[0] = tg, fu.table[1] = tu;
  fu.ids = ids1;
  fu.n_slots = static_cast<int>(n * (k + 1)), fu.n_expert = n_table, fu.x_div = static_cast<int>(k + 1);
  fu.extra[0] = xg, fu.extra[1] = xu;
  fu.norm_w = fp(norm), fu.eps = eps;
  fu.routed_pdl = opt_.moe_pdl;
  fu.routed_pipe = opt_.moe_pipe;
  if (!cudamv::matvec_fused(pg, fp(x), g1, 1, fu, st)) return false;
  ps_gu.close();
  OpScope ps_d(prof_.get(), "moe_experts_down", routed_bytes(Dn, E, slots1), [&] { return routed_shape(Dn, E, slots1); });
  cudamv::MatvecFusion fd;
  fd.table[0] = td;
  fd.ids = ids1;
  fd.n_slots = fu.n_slots, fd.n_expert = fu.n_expert, fd.x_div = 1;
  fd.extra[0] = xd;
  fd.routed_pdl = opt_.moe_pdl;
  fd.routed_pipe = opt_.moe_pipe;
  if (!cudamv::matvec_fused(pd, g1, d1, 1, fd, st)) return false;
  ps_d.close();
  OpScope ps_c(prof_.get(), "moe_combine_add");
  launch_moe_combine_add(d1, dim, w1, k + 1, k + 1, nullptr, 0, nullptr, 0, fp(x), fstride(x), n, dim, st,
                         opt_.moe_pdl && small_pdl_);
  ps_c.close();
  if (streamed) {  // the cache's use counts of the k routed slots (n == 1: ids1[0 .. k))
    OpScope ps_n(prof_.get(), "expert_counts");
    experts_->count(*Sg, ids1, k, st);
    experts_->count(*Su, ids1, k, st);
    experts_->count(*Sd, ids1, k, st);
  }
  return true;
}

void CudaBackend::moe_experts_residual(const MoeExperts& a, const Tensor& x, const Tensor& norm, float eps,
                                       const Tensor& xn) {
  if (!fuse_ || opt_.moe_legacy) {
    Backend::moe_experts_residual(a, x, norm, eps, xn);
    return;
  }
  ctx_->make_current();
  if (moe_experts_fused(a, x, norm, eps)) return;
  // Otherwise (streamed experts, many rows, other shapes) the default's ops with the norm of
  // one warp per row (the matvec prologue's bits, as the fused path and norm_swiglu norm x):
  // a row gets the fused path's bits whatever the cache holds.
  check(x.type == GgmlType::F32 && xn.type == GgmlType::F32 && norm.type == GgmlType::F32 && xn.rows == x.rows &&
            xn.cols == x.cols && norm.cols == x.cols,
        "moe_experts_residual shapes");
  {
    OpScope ps(prof_.get(), "rms_norm");
    launch_rms_norm_rows(fp(x), fstride(x), fp(norm), eps, fp(xn), fstride(xn), x.rows, x.cols, ctx_->stream());
  }
  moe_route(a.logits, a.normalize, a.scale, a.ids, a.weights);
  // The file tier: the block's three stacks read in one batch (skipped where they do not fit together).
  bring_experts({&a.gate_exps, &a.up_exps, &a.down_exps}, a.ids, false);
  matmul_id_swiglu(a.gate_exps, a.up_exps, a.n_expert, xn, a.ids, a.gate, a.up);
  matmul_id(a.down_exps, a.n_expert, a.gate, a.ids, a.down);
  if (!a.shexp_gate.data) {
    moe_combine_add(a.down, a.weights, Tensor{}, Tensor{}, a.out, x);
    return;
  }
  norm_swiglu(x, norm, eps, xn, a.shexp_gate, a.shexp_up, a.sh_gate, a.sh_up);
  matmul(a.shexp_down, a.sh_gate, a.sh_out);
  moe_combine_add(a.down, a.weights, a.sh_out, a.sh_g, a.out, x);
}

ExpertCacheStats CudaBackend::expert_cache_stats() const { return experts_ ? experts_->stats() : ExpertCacheStats{}; }

uint64_t CudaBackend::routed_id_downloads() const { return moe_->downloads; }

void CudaBackend::reset_expert_cache_stats() {
  if (experts_) experts_->reset_stats();
}

}  // namespace df::cuda
