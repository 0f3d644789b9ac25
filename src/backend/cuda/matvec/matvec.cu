// Context, packing and the launchers of matvec.cuh.
#include "backend/cuda/matvec/matvec.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/layout.cuh"
#include "common/error.h"
#include "quant/iq_tables.h"

namespace df::cudamv {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA matvec: ") + what + ": " + cudaGetErrorString(e));
}

}  // namespace

void check_launch(const char* what) { check(cudaGetLastError(), what); }

void fill_tables(DevTables& h) {
  std::memcpy(h.iq2xxs, quant::kIq2xxsGrid, sizeof h.iq2xxs);
  std::memcpy(h.iq2xs, quant::kIq2xsGrid, sizeof h.iq2xs);
  std::memcpy(h.iq2s, quant::kIq2sGrid, sizeof h.iq2s);
  std::memcpy(h.iq1s, quant::kIq1sGrid, sizeof h.iq1s);
  std::memcpy(h.iq3xxs, quant::kIq3xxsGrid, sizeof h.iq3xxs);
  std::memcpy(h.iq3s, quant::kIq3sGrid, sizeof h.iq3s);
  std::memcpy(h.signs, quant::kIq2xsSigns, sizeof h.signs);
  std::memcpy(h.iq4nl, quant::kIq4nlValues, sizeof h.iq4nl);
}

Context::Context(bool int8_x, bool pdl, bool pipe, bool pipe_rows)
    : int8_x_(int8_x), pdl_(pdl), pipe_(pipe), pipe_rows_(pipe_rows) {
  DevTables h;
  fill_tables(h);
  check(cudaMalloc(&tables_, sizeof h), "allocating the IQ tables");
  const cudaError_t e = cudaMemcpy(tables_, &h, sizeof h, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(tables_);
    tables_ = nullptr;
    check(e, "uploading the IQ tables");
  }
  prepare_fast();
  prepare_dp4a();
  prepare_raw_basic();
  prepare_raw_iq();
  prepare_i8_basic();
  prepare_i8_iq();
  check(cudaGetLastError(), "setting kernel attributes");
}

Context::~Context() {
  if (tables_) cudaFree(tables_);
  if (preround_buf_) cudaFree(preround_buf_);
}

void Context::set_preround(int64_t min_elems) {
  preround_min_ = std::max<int64_t>(0, min_elems);
  if (preround_min_ > 0 && !preround_buf_) {
    void* p = nullptr;
    check(cudaMalloc(&p, kMaxSmem), "allocating the matvec's rounded-x buffer");
    preround_buf_ = static_cast<uint8_t*>(p);
  }
}

PackedWeight& PackedWeight::operator=(PackedWeight&& o) noexcept {
  if (this != &o) {
    if (owns && data) cudaFree(data);
    type = o.type, cols = o.cols, rows = o.rows, data = o.data, bytes = o.bytes;
    q_row_bytes = o.q_row_bytes, m_offset = o.m_offset, m_row_bytes = o.m_row_bytes;
    tables = o.tables, owns = o.owns, int8_x = o.int8_x, pdl = o.pdl, pipe = o.pipe;
    pipe_rows = o.pipe_rows;
    l2_prefetch = o.l2_prefetch, blocks_per_sm = o.blocks_per_sm, short_pipe = o.short_pipe, trace = o.trace;
    stage_x = o.stage_x, cluster = o.cluster, preround_min = o.preround_min, preround_buf = o.preround_buf;
    o.data = nullptr, o.owns = false, o.bytes = 0;
  }
  return *this;
}

PackedWeight::~PackedWeight() {
  if (owns && data) cudaFree(data);
}

bool supported(GgmlType type) { return layout_supported(type); }

size_t packed_bytes(GgmlType type, int64_t cols, int64_t rows) {
  const Layout l = layout_of(type, cols);
  return (l.q_row_bytes + l.m_row_bytes) * static_cast<size_t>(rows);
}

PackedWeight pack_weight(const Context& ctx, GgmlType type, int64_t cols, int64_t rows,
                         const void* host_blocks, void* device_dst, cudaStream_t stream) {
  if (rows <= 0) throw Error("CUDA matvec: a weight needs at least one row");
  const Layout l = layout_of(type, cols);
  PackedWeight p;
  p.type = type, p.cols = cols, p.rows = rows;
  p.q_row_bytes = l.q_row_bytes, p.m_row_bytes = l.m_row_bytes;
  p.m_offset = l.q_row_bytes * static_cast<size_t>(rows);
  p.bytes = packed_bytes(type, cols, rows);
  p.tables = ctx.tables();
  p.int8_x = ctx.int8_x() && int8_x_supported(type, cols);
  p.pdl = ctx.pdl();
  p.pipe = ctx.pipe();
  p.pipe_rows = ctx.pipe_rows();
  p.l2_prefetch = ctx.l2_prefetch_bytes();
  p.blocks_per_sm = ctx.blocks_per_sm();
  p.short_pipe = ctx.short_pipe();
  p.stage_x = ctx.stage_x();
  p.cluster = ctx.cluster();
  p.preround_min = ctx.preround_min();
  p.preround_buf = ctx.preround_buf();
  std::vector<uint8_t> staging(p.bytes);
  pack_rows_parallel(type, cols, rows, static_cast<const uint8_t*>(host_blocks), l, staging.data());
  if (device_dst) {
    p.data = static_cast<uint8_t*>(device_dst);
  } else {
    void* d = nullptr;
    check(cudaMalloc(&d, p.bytes), ("allocating " + std::to_string(p.bytes) + " bytes for a weight").c_str());
    p.data = static_cast<uint8_t*>(d);
    p.owns = true;
  }
  check(cudaMemcpyAsync(p.data, staging.data(), p.bytes, cudaMemcpyHostToDevice, stream), "uploading a weight");
  check(cudaStreamSynchronize(stream), "uploading a weight");
  return p;
}

namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void matvec(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t stream) {
  if (n < 1 || n > kMaxRows) throw Error("CUDA matvec: n = " + std::to_string(n) + " is outside [1, 8]");
  if (!W.data) throw Error("CUDA matvec: empty weight");
  if (!aligned16(x)) throw Error("CUDA matvec: x must be 16-byte aligned");
  if (!matvec_fused(W, x, y, n, MatvecFusion{}, stream)) throw Error("CUDA matvec: launch failed");
}

MvFuse fuse_of(const PackedWeight& W, int n, const MatvecFusion& fu) {
  MvFuse f;
  for (int i = 0; i < 2 && fu.more[i]; ++i) {
    const PackedWeight& M = *fu.more[i];
    if (M.type != W.type || M.cols != W.cols || M.q_row_bytes != W.q_row_bytes || M.m_row_bytes != W.m_row_bytes)
      throw Error("CUDA matvec: fused matrices must share type and width");
    f.nmat = i + 2;
    f.q[i] = M.data;
    f.m[i] = M.data + M.m_offset;
    f.rows[i] = M.rows;
    f.y[i] = fu.y_more[i];
  }
  if (fu.swiglu && (f.nmat != 2 || fu.more[0]->rows != W.rows)) throw Error("CUDA matvec: swiglu needs gate and up");
  for (int i = 0; i < 3; ++i) {
    f.epi[i].op = static_cast<Epi>(fu.epi[i]);
    f.epi[i].bias = fu.bias[i];
    f.epi[i].scale = fu.scale[i];
  }
  f.swiglu = fu.swiglu;
  f.norm_w = fu.norm_w;
  f.eps = fu.eps;
  f.float_norm = fu.float_norm;
  if (fu.ids) {
    if ((n != 1 && fu.x_div != 1) || fu.n_slots < 1 || fu.n_slots > 65535 || fu.n_expert < 1 || fu.x_div < 1 || !fu.table[0] ||
        (f.nmat > 1 && (!fu.table[1] || !fu.swiglu)))
      throw Error("CUDA matvec: bad routed-expert launch");
    f.ids = fu.ids, f.table[0] = fu.table[0], f.table[1] = fu.table[1];
    f.n_slots = fu.n_slots, f.n_expert = fu.n_expert, f.x_div = fu.x_div;
    f.routed_pdl = fu.routed_pdl;
    f.routed_pipe = fu.routed_pipe;
    for (int i = 0; i < 2 && fu.extra[0]; ++i) {
      const PackedWeight* X = fu.extra[i];
      const PackedWeight& P = i == 0 ? W : *fu.more[0];
      if (i == 1 && f.nmat < 2) break;
      if (!X || !X->data || X->type != P.type || X->cols != P.cols || X->rows != P.rows ||
          X->q_row_bytes != P.q_row_bytes || X->m_row_bytes != P.m_row_bytes)
        throw Error("CUDA matvec: the extra expert differs from the stack's experts");
      f.xq[i] = X->data;
      f.xm[i] = X->data + X->m_offset;
    }
  }
  f.pdl = W.pdl;
  f.pipe = W.pipe;
  f.pipe_rows = W.pipe_rows;
  f.l2_bytes = W.l2_prefetch;
  f.blocks_per_sm = W.blocks_per_sm;
  f.short_pipe = W.short_pipe;
  f.stage_x = W.stage_x;
  f.cluster = W.cluster;
  f.preround_min = W.preround_min;
  f.xq_buf = W.preround_buf;
  f.trace = W.trace;
  return f;
}

bool matvec_fused(const PackedWeight& W, const float* x, float* y, int n, const MatvecFusion& fu,
                  cudaStream_t stream) {
  if (n < 1 || n > kMaxRows) throw Error("CUDA matvec: n = " + std::to_string(n) + " is outside [1, 8]");
  if (!W.data) throw Error("CUDA matvec: empty weight");
  if (!aligned16(x)) throw Error("CUDA matvec: x must be 16-byte aligned");
  const MvFuse f = fuse_of(W, n, fu);
  Mv r = matvec_fast(W, x, y, n, stream, f);
  if (r == Mv::kNoType) {
    const PlanarView v = planar_view(W);
    if (W.int8_x) {  // the int8-x kernels over raw blocks
      r = matvec_i8_basic(W.type, v, x, y, n, stream, f);
      if (r == Mv::kNoType) r = matvec_i8_iq(W.type, v, x, y, n, stream, f);
    }
    if (r == Mv::kNoType) r = matvec_raw_basic(W.type, v, x, y, n, stream, f);
    if (r == Mv::kNoType) r = matvec_raw_iq(W.type, v, x, y, n, stream, f);
  }
  if (r == Mv::kNoType) quant::throw_unsupported_type(W.type);
  return r == Mv::kDone;
}

void get_rows(const PackedWeight& table, const int32_t* ids, int n, float* out, cudaStream_t stream) {
  if (n < 0) throw Error("CUDA get_rows: negative n");
  if (n == 0) return;
  if (!table.data) throw Error("CUDA get_rows: empty table");
  if (!aligned16(out)) throw Error("CUDA get_rows: out must be 16-byte aligned");
  if (get_rows_fast(table, ids, n, out, stream)) return;
  const PlanarView v = planar_view(table);
  if (get_rows_raw_basic(table.type, v, ids, n, out, stream) || get_rows_raw_iq(table.type, v, ids, n, out, stream))
    return;
  quant::throw_unsupported_type(table.type);
}

}  // namespace df::cudamv
