// Workbench of the GPU matvec kernels (src/backend/cuda/matvec): the device's read
// bandwidth measured with a read kernel, validation of every format against the CPU
// reference (NMSE per n in 1..8, bit-identity of rows across n, get_rows exactness), and the
// speed of every format on the real shapes (rows x cols = outputs x inputs), with the
// launch variants (rows per warp, parts in flight) of the planar formats; every format with
// int8-x kernels (dev_dp4a.cuh) in both modes, old (f32 x) beside new (int8 x). JSON to --out.
//
//   bench_matvec_cuda --out matvec_cuda.json [--quick] [--formats q4_0,q8_0]
//   bench_matvec_cuda --chain q4_0:4b [--chain-cfgs 0:0:0,1:0:0] [--persist 16:0:1,4:0:2]
//     [--persist2 16:3:4:1:0,8:3:4:2:2] (the second persistent chain: persistent_chain2.cuh)
//     (a decode step's matvecs as launches, and as one persistent launch: persistent_chain.cuh)
//     [--chain-trace] (per-block phase stamps of every launch of the chain, summarised per stage)
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/matvec/variants.cuh"
#include "common/error.h"
#include "matvec_testing.h"
#include "persistent_chain.cuh"
#include "persistent_chain2_runs.cuh"

using df::GgmlType;
using nlohmann::json;
namespace mv = df::cudamv;
namespace mt = df::cudamv::testing;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw df::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

// ---- read bandwidth: every byte of a buffer read once with 16-byte loads ----
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, unsigned* __restrict__ sink) {
  uint32_t acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = mv::ld_stream(p + i), b = mv::ld_stream(p + i + stride);
    const uint4 c = mv::ld_stream(p + i + 2 * stride), d = mv::ld_stream(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) {
    const uint4 a = mv::ld_stream(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

json measure_read_bandwidth(size_t bytes) {
  void* buf = nullptr;
  unsigned* sink = nullptr;
  ck(cudaMalloc(&buf, bytes), "bandwidth buffer");
  ck(cudaMalloc(&sink, 4), "sink");
  ck(cudaMemset(buf, 0x5a, bytes), "memset");
  int sms = 0;
  ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "attr");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> gbs;
  for (int rep = 0; rep < 8; ++rep) {
    cudaEventRecord(a);
    read_kernel<<<sms * 8, 512>>>(static_cast<const uint4*>(buf), bytes / 16, sink);
    cudaEventRecord(b);
    ck(cudaEventSynchronize(b), "read kernel");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (rep > 0) gbs.push_back(static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  cudaFree(buf);
  cudaFree(sink);
  const double best = *std::max_element(gbs.begin(), gbs.end());
  return {{"bytes", bytes}, {"gbs_median", median(gbs)}, {"gbs_best", best}};
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { ck(cudaMalloc(&p, n), "alloc"); }
  ~DevBuf() { cudaFree(p); }
  float* f() const { return static_cast<float*>(p); }
};

// ---- validation at a moderate shape ----
json validate(const mv::Context& ctx, GgmlType t, int64_t rows, int64_t cols, bool int8) {
  const auto blocks = mt::random_blocks(t, cols, rows, 1000 + static_cast<uint64_t>(t));
  const auto w = mt::dequant_rows(t, blocks.data(), cols, rows);
  const auto x = mt::random_x(mv::kMaxRows * cols, 77);
  const auto ref = mt::reference(w, x, cols, rows, mv::kMaxRows);
  mv::PackedWeight W = mv::pack_weight(ctx, t, cols, rows, blocks.data());
  W.int8_x = int8 && mv::int8_x_supported(t, cols);
  DevBuf dx(x.size() * 4), dy(mv::kMaxRows * rows * 4), dy1(rows * 4);
  ck(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
  json nm = json::array();
  double worst = 0.0;
  bool identical = true;
  std::vector<float> y8;
  std::vector<std::vector<float>> ys(mv::kMaxRows + 1);
  for (int n = 1; n <= mv::kMaxRows; ++n) {
    ck(cudaMemset(dy.p, 0xff, mv::kMaxRows * rows * 4), "poison");
    mv::matvec(W, dx.f(), dy.f(), n, nullptr);
    ck(cudaDeviceSynchronize(), "matvec");
    ys[n].resize(static_cast<size_t>(n * rows));
    ck(cudaMemcpy(ys[n].data(), dy.p, ys[n].size() * 4, cudaMemcpyDeviceToHost), "y");
    const double e = mt::nmse(ys[n].data(), ref.data(), ys[n].size());
    nm.push_back(e);
    worst = std::max(worst, e);
  }
  for (int j = 0; j < mv::kMaxRows; ++j) {
    mv::matvec(W, dx.f() + j * cols, dy1.f(), 1, nullptr);
    std::vector<float> y1(static_cast<size_t>(rows));
    ck(cudaMemcpy(y1.data(), dy1.p, rows * 4, cudaMemcpyDeviceToHost), "y1");
    for (int n = j + 1; n <= mv::kMaxRows; ++n)
      identical = identical && std::memcmp(y1.data(), ys[n].data() + j * rows, rows * 4) == 0;
  }
  // get_rows on 16 ids
  std::vector<int32_t> ids(16);
  for (int k = 0; k < 16; ++k) ids[k] = static_cast<int32_t>((k * 7919) % rows);
  DevBuf did(16 * 4), dout(16 * cols * 4);
  ck(cudaMemcpy(did.p, ids.data(), 64, cudaMemcpyHostToDevice), "ids");
  mv::get_rows(W, static_cast<const int32_t*>(did.p), 16, dout.f(), nullptr);
  std::vector<float> out(16 * cols);
  ck(cudaMemcpy(out.data(), dout.p, out.size() * 4, cudaMemcpyDeviceToHost), "rows");
  bool exact = true;
  for (int k = 0; k < 16; ++k) exact = exact && std::memcmp(out.data() + k * cols, w.data() + ids[k] * cols, cols * 4) == 0;
  return {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols}, {"int8_x", W.int8_x}, {"nmse_per_n", nm},
          {"nmse_worst", worst}, {"rows_bit_identical_across_n", identical}, {"get_rows_exact", exact}};
}

// ---- speed ----
mv::PackedWeight clone(const mv::PackedWeight& src) {
  mv::PackedWeight c;
  c.type = src.type, c.cols = src.cols, c.rows = src.rows, c.bytes = src.bytes;
  c.q_row_bytes = src.q_row_bytes, c.m_offset = src.m_offset, c.m_row_bytes = src.m_row_bytes;
  c.tables = src.tables;
  c.int8_x = src.int8_x;
  c.pdl = src.pdl;
  c.pipe = src.pipe;
  c.pipe_rows = src.pipe_rows;
  void* d = nullptr;
  ck(cudaMalloc(&d, src.bytes), "clone");
  c.data = static_cast<uint8_t*>(d);
  c.owns = true;
  ck(cudaMemcpy(c.data, src.data, src.bytes, cudaMemcpyDeviceToDevice), "clone copy");
  return c;
}

// Fills a rows-row weight with copies of a tile's rows (row r = tile row r % tile rows).
mv::PackedWeight replicate(const mv::PackedWeight& tile, int64_t rows) {
  mv::PackedWeight w;
  w.type = tile.type, w.cols = tile.cols, w.rows = rows;
  w.q_row_bytes = tile.q_row_bytes, w.m_row_bytes = tile.m_row_bytes;
  w.m_offset = tile.q_row_bytes * static_cast<size_t>(rows);
  w.bytes = mv::packed_bytes(tile.type, tile.cols, rows);
  w.tables = tile.tables;
  w.int8_x = tile.int8_x;
  w.pdl = tile.pdl;
  w.pipe = tile.pipe;
  w.pipe_rows = tile.pipe_rows;
  void* d = nullptr;
  ck(cudaMalloc(&d, w.bytes), "weight");
  w.data = static_cast<uint8_t*>(d);
  w.owns = true;
  for (int64_t r = 0; r < rows; r += tile.rows) {
    const int64_t m = std::min(tile.rows, rows - r);
    ck(cudaMemcpy(w.data + r * w.q_row_bytes, tile.data, m * w.q_row_bytes, cudaMemcpyDeviceToDevice), "rep q");
    if (w.m_row_bytes)
      ck(cudaMemcpy(w.data + w.m_offset + r * w.m_row_bytes, tile.data + tile.m_offset, m * w.m_row_bytes,
                    cudaMemcpyDeviceToDevice), "rep m");
  }
  return w;
}

// Median time of one launch (ms), launches captured in a graph cycling over the copies.
template <class Launch>
double time_launches(const std::vector<const mv::PackedWeight*>& ws, Launch&& launch, cudaStream_t s) {
  const int copies = static_cast<int>(ws.size());
  const int k = copies * std::max(1, 48 / copies);
  for (int i = 0; i < copies; ++i) launch(*ws[i], s);  // warm-up (and launch errors)
  ck(cudaStreamSynchronize(s), "warm-up");
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < k; ++i) launch(*ws[i % copies], s);
  ck(cudaStreamEndCapture(s, &g), "capture end");
  ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  ck(cudaGraphLaunch(ge, s), "graph");
  std::vector<double> ms;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a, s);
    ck(cudaGraphLaunch(ge, s), "graph");
    cudaEventRecord(b, s);
    ck(cudaEventSynchronize(b), "graph run");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t / k);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(ms);
}

bool planar_fast(GgmlType t) {
  return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16 || t == GgmlType::Q4_0 ||
         t == GgmlType::Q8_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
         t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K || t == GgmlType::IQ4_XS;
}

json speed(const mv::Context& ctx, GgmlType t, int64_t rows, int64_t cols, double bw, bool variants,
           const std::vector<int>& ns, const std::vector<int>& pipe_codes, const std::vector<int>& pipe_ns,
           const std::string& modes, cudaStream_t s) {
  const size_t rb = df::row_bytes(t, cols);
  const int64_t tile_rows = std::min<int64_t>(rows, std::max<int64_t>(64, (24u << 20) / rb));
  const auto blocks = mt::random_blocks(t, cols, tile_rows, 5000 + static_cast<uint64_t>(t));
  mv::PackedWeight tile = mv::pack_weight(ctx, t, cols, tile_rows, blocks.data());
  std::vector<mv::PackedWeight> copies;
  copies.push_back(replicate(tile, rows));
  const size_t per = copies[0].bytes;
  const int ncopies = static_cast<int>(std::min<size_t>(32, (size_t{640} << 20) / per + 1));
  for (int i = 1; i < ncopies; ++i) copies.push_back(clone(copies[0]));
  std::vector<const mv::PackedWeight*> ws;
  for (auto& c : copies) ws.push_back(&c);

  const auto x = mt::random_x(mv::kMaxRows * cols, 99);
  DevBuf dx(x.size() * 4), dy(mv::kMaxRows * rows * 4);
  ck(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
  const double weight_bytes = static_cast<double>(rb) * static_cast<double>(rows);

  const bool has_int8 = mv::int8_x_supported(t, cols);
  for (auto& c : copies) c.pdl = false;
  // pipe: the pipelined int8-x default (Context::pipe), else the previous loop; rows: and so
  // at n = 2..8 (Context::pipe_rows), else those n run the previous loop.
  auto set_mode = [&](bool int8, bool pdl = false, bool pipe = false, bool rows = false) {
    for (auto& c : copies) c.int8_x = int8 && has_int8, c.pdl = pdl, c.pipe = pipe, c.pipe_rows = rows;
  };
  // check: the tile rows against the CPU reference (n = 1), every row equal to its tile row
  const int64_t vrows = std::min<int64_t>(tile_rows, 256);
  const auto w = mt::dequant_rows(t, blocks.data(), cols, vrows);
  const auto ref = mt::reference(w, x, cols, vrows, 1);
  auto check = [&](bool& rep_ok) {
    ck(cudaMemset(dy.p, 0xff, rows * 4), "poison");
    ck(cudaDeviceSynchronize(), "poison");  // s does not wait for the legacy stream
    mv::matvec(copies[0], dx.f(), dy.f(), 1, s);
    ck(cudaStreamSynchronize(s), "check");
    std::vector<float> y(static_cast<size_t>(rows));
    ck(cudaMemcpy(y.data(), dy.p, rows * 4, cudaMemcpyDeviceToHost), "y");
    rep_ok = true;
    for (int64_t r = tile_rows; r < rows; ++r) rep_ok = rep_ok && std::memcmp(&y[r], &y[r % tile_rows], 4) == 0;
    return mt::nmse(y.data(), ref.data(), static_cast<size_t>(vrows));
  };
  bool rep_ok = true, rep_ok8 = true;
  set_mode(false);
  const double e = check(rep_ok);
  set_mode(true);
  const double e8 = has_int8 ? check(rep_ok8) : e;
  set_mode(false);

  json res = {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols},
              {"weight_bytes", weight_bytes}, {"packed_bytes", per}, {"copies", ncopies},
              {"nmse_n1", e}, {"replicated_rows_consistent", rep_ok && rep_ok8}, {"int8_x", has_int8}};
  if (has_int8) res["nmse_n1_int8x"] = e8;
  if (has_int8) {  // the pipelined default (n = 2..8 too) against the previous loop: every row, bit for bit
    json eq = json::object();
    for (int n = 1; n <= mv::kMaxRows; ++n) {
      std::vector<float> ya(static_cast<size_t>(n * rows)), yb(ya.size());
      for (int pipe = 0; pipe < 2; ++pipe) {
        set_mode(true, false, pipe == 1, pipe == 1);
        ck(cudaMemset(dy.p, 0xff, n * rows * 4), "poison");
        ck(cudaDeviceSynchronize(), "poison");
        mv::matvec(copies[0], dx.f(), dy.f(), n, s);
        ck(cudaStreamSynchronize(s), "pipe check");
        ck(cudaMemcpy((pipe ? yb : ya).data(), dy.p, ya.size() * 4, cudaMemcpyDeviceToHost), "y");
      }
      eq[std::to_string(n)] = std::memcmp(ya.data(), yb.data(), ya.size() * 4) == 0;
    }
    res["pipe_bits_equal_old"] = eq;
    set_mode(false);
  }
  // the read kernel over the same bytes (same copies, same graph timing): the bandwidth
  // reachable at this size, launch and tail effects included
  int sms = 1;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  DevBuf sink(4);
  const double read_ms = time_launches(ws, [&](const mv::PackedWeight& W, cudaStream_t st) {
    read_kernel<<<sms * 8, 512, 0, st>>>(reinterpret_cast<const uint4*>(W.data), W.bytes / 16, static_cast<unsigned*>(sink.p));
  }, s);
  const double read_gbs = static_cast<double>(per) / (read_ms * 1e-3) / 1e9;
  res["read_kernel_same_bytes_gbs"] = read_gbs;
  // "default": the f32-x kernels, "int8x": the int8-x kernels (the previous loop, stop 19's
  // default), "int8x_pdl": launched with programmatic dependent launch (each launch's weight
  // loads overlap the end of the previous launch, as in a decode step's graph); "int8x_pipe",
  // "int8x_pipe_pdl": the pipelined int8-x kernel at n = 1 only (main before issue 11's rows:
  // n = 2..8 in the previous loop), without and with PDL; "int8x_rows", "int8x_rows_pdl": the
  // pipelined kernels at every n (Context::pipe_rows, the default). --modes picks some.
  const char* mode_names[] = {"default", "int8x", "int8x_pdl", "int8x_pipe", "int8x_pipe_pdl", "int8x_rows", "int8x_rows_pdl"};
  for (int mode = 0; mode < 7; ++mode) {
    const bool int8 = mode > 0;
    if (int8 && !has_int8) break;
    if (!modes.empty() && ("," + modes + ",").find("," + std::string(mode_names[mode]) + ",") == std::string::npos) continue;
    set_mode(int8, mode == 2 || mode == 4 || mode == 6, mode >= 3, mode >= 5);
    json per_n = json::object();
    for (int n : ns) {
      const double ms = time_launches(ws, [&](const mv::PackedWeight& W, cudaStream_t st) { mv::matvec(W, dx.f(), dy.f(), n, st); }, s);
      const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
      per_n[std::to_string(n)] = {{"us", ms * 1e3}, {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw},
                                  {"pct_of_same_size_read", 100.0 * gbs / read_gbs}};
    }
    res[mode_names[mode]] = per_n;
  }
  set_mode(false);
  if (variants && has_int8) {
    json var = json::array();
    for (int code : {3011, 3012, 3014, 3021, 3022, 3024, 3041, 3042}) {
      const double ms = time_launches(ws, [&](const mv::PackedWeight& W, cudaStream_t st) {
        if (!mv::matvec_dp4a_variant(W, dx.f(), dy.f(), code, st)) throw df::Error("no dp4a variant");
      }, s);
      const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
      var.push_back({{"rw", code / 10 % 10}, {"u", code % 10}, {"us", ms * 1e3}, {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw}});
    }
    res["int8x_variants_n1"] = var;
  }
  if (has_int8 && !pipe_codes.empty()) {
    // The pipelined int8-x kernel (mv_kernel D > 0; code 5000 + 100 D + 10 RW + U) at n in
    // pipe_ns (n > 1: the codes variants_dp4a_pipe.cu has at that n), without PDL (n = 1 only)
    // and with it, its rows checked bit for bit against the previous loop (D = 0) at that n.
    json var = json::array();
    for (int n : pipe_ns) {
      set_mode(true);
      std::vector<float> y_ref(static_cast<size_t>(n * rows)), y_var(y_ref.size());
      mv::matvec(copies[0], dx.f(), dy.f(), n, s);
      ck(cudaStreamSynchronize(s), "reference run");
      ck(cudaMemcpy(y_ref.data(), dy.p, y_ref.size() * 4, cudaMemcpyDeviceToHost), "y_ref");
      for (int code : pipe_codes) {
        ck(cudaMemset(dy.p, 0xff, n * rows * 4), "poison");
        ck(cudaDeviceSynchronize(), "poison");
        if (!mv::matvec_dp4a_pipe_variant(copies[0], dx.f(), dy.f(), code, s, n)) continue;
        ck(cudaStreamSynchronize(s), "variant run");
        ck(cudaMemcpy(y_var.data(), dy.p, y_var.size() * 4, cudaMemcpyDeviceToHost), "y_var");
        const bool same = std::memcmp(y_ref.data(), y_var.data(), y_ref.size() * 4) == 0;
        json one = {{"n", n}, {"d", code / 100 % 10}, {"rw", code / 10 % 10}, {"u", code % 10}, {"bits_equal_default", same}};
        int regs = 0, local = 0;
        if (mv::matvec_dp4a_pipe_regs(t, code, regs, local, n)) one["regs"] = regs, one["local_bytes"] = local;
        for (bool pdl : {false, true}) {
          if (!pdl && n > 1) continue;
          set_mode(true, pdl);
          const double ms = time_launches(ws, [&](const mv::PackedWeight& W, cudaStream_t st) {
            if (!mv::matvec_dp4a_pipe_variant(W, dx.f(), dy.f(), code, st, n)) throw df::Error("no pipelined variant");
          }, s);
          const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
          one[pdl ? "pdl" : "plain"] = {{"us", ms * 1e3}, {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw}};
        }
        set_mode(true);
        var.push_back(one);
      }
    }
    res["pipe_variants"] = var;
    set_mode(false);
  }
  if (variants && planar_fast(t)) {
    json var = json::array();
    for (int code : {11, 12, 14, 21, 22, 24, 41, 42, 122, 1022, 2021, 2022}) {
      const double ms = time_launches(ws, [&](const mv::PackedWeight& W, cudaStream_t st) {
        if (!mv::matvec_fast_variant(W, dx.f(), dy.f(), code, st)) throw df::Error("no variant");
      }, s);
      const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
      var.push_back({{"rw", code / 10 % 10}, {"u", code % 10}, {"x", code == 122 ? "global" : code == 1022 ? "shared" : "default"},
                     {"conversion", code >= 2000 ? "other" : "default"}, {"us", ms * 1e3},
                     {"gbs", gbs}, {"pct_of_read_bw", 100.0 * gbs / bw}});
    }
    res["variants_n1"] = var;
  }
  return res;
}

#include "matvec_chain_bench.cuh"  // --chain: ChainShape, ChainCfg, chain()

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GPU matvec workbench");
  std::string out_path = "matvec_cuda.json", formats_arg;
  bool quick = false, all_shapes = false;
  app.add_option("--out", out_path, "JSON output file");
  app.add_option("--formats", formats_arg, "comma-separated type names (default: all)");
  app.add_flag("--quick", quick, "smaller bandwidth buffer, speed on two shapes only");
  app.add_flag("--all-shapes", all_shapes, "every format on every speed shape (default: the formats other than the "
                                           "priority ones on 17408x5120 and 248320x5120 only)");
  bool no_variants = false, no_validate = false;
  std::string pipe_arg = "5211,5221,5212,5222,5311,5321,5312,5322,5411,5421,5611";
  app.add_flag("--no-variants", no_variants, "skip the (RW, U) variants of the unpipelined kernels");
  app.add_flag("--no-validate", no_validate, "skip the validation at 1024 x 4096");
  std::string shapes_arg, ns_arg, modes_arg, pipe_ns_arg;
  app.add_option("--ns", ns_arg, "comma-separated row counts to time on every layer shape (default: 1, and 1,2,4,8 at 17408 rows)");
  app.add_option("--modes", modes_arg, "comma-separated modes to time (default: all; default,int8x,int8x_pdl,int8x_pipe,"
                                       "int8x_pipe_pdl,int8x_rows,int8x_rows_pdl)");
  app.add_option("--pipe-ns", pipe_ns_arg, "row counts of the pipelined variants (default: 1; others: 2,4,8)");
  app.add_option("--shapes", shapes_arg, "comma-separated ROWSxCOLS of the speed shapes to run (default: all)");
  app.add_option("--pipe-codes", pipe_arg, "pipelined int8-x variants to time (5000 + 100 D + 10 RW + U; empty: none)");
  std::string chain_arg, chain_cfg_arg = "0:0:0,1:0:0,1:8:0,1:16:0,1:24:0,1:48:0,1:1024:0,1:0:1,1:8:1,1:24:1,1:1024:1,0:24:0,0:1024:0";
  app.add_option("--chain", chain_arg,
                 "only the decode chain (no validation, no shapes): comma-separated TYPE:SHAPE, SHAPE 4b or 27b "
                 "(e.g. q4_0:4b,q8_0:4b,q4_0:27b)");
  app.add_option("--chain-cfgs", chain_cfg_arg,
                 "chain configurations PDL:L2_MB:BLOCKS_PER_SM[:CLUSTER] (CLUSTER: thread block clusters of the "
                 "int8-x launches, 0 none), comma-separated");
  bool chain_trace = false;
  app.add_flag("--chain-trace", chain_trace,
               "with --chain: one more replay of the first configuration with per-block phase stamps of every launch "
               "(entry, griddepcontrol.wait, x prologue, end), summarised per stage");
  std::string persist_arg;
  app.add_option("--persist", persist_arg,
                 "with --chain, Q4_0: the persistent one-launch chain (persistent_chain.cuh), variants "
                 "RING:SLEEP:BLOCKS_PER_SM comma-separated (BLOCKS_PER_SM 0: as many as fit)");
  std::string persist2_arg;
  app.add_option("--persist2", persist2_arg,
                 "with --chain, Q4_0: the second persistent chain (persistent_chain2.cuh), variants "
                 "NW:D:U:BPS:PF[:FLAGS] comma-separated (warps per block, ring slots, parts per slot, blocks per SM, "
                 "items per warp prefetched into L2 at a stage's end, flags: 1 fast norm, 2 cp.async x planes, "
                 "4 control warp, 8 fixed cost only, 16 barriers only)");
  CLI11_PARSE(app, argc, argv);
  try {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) throw df::Error("no CUDA device");
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "device properties");
    auto ints = [](const std::string& a) {
      std::vector<int> v;
      for (size_t i = 0; i < a.size();) {
        const size_t e = std::min(a.find(',', i), a.size());
        if (e > i) v.push_back(std::stoi(a.substr(i, e - i)));
        i = e + 1;
      }
      return v;
    };
    const std::vector<int> pipe_codes = ints(pipe_arg), ns_list = ints(ns_arg);
    std::vector<int> pipe_ns = ints(pipe_ns_arg);
    if (pipe_ns.empty()) pipe_ns = {1};
    for (int n : ns_list)
      if (n < 1 || n > mv::kMaxRows) throw df::Error("--ns: " + std::to_string(n) + " is outside [1, 8]");
    std::vector<GgmlType> types;
    for (GgmlType t : mt::all_weight_types())
      if (formats_arg.empty() || ("," + formats_arg + ",").find("," + std::string(df::type_name(t)) + ",") != std::string::npos)
        types.push_back(t);

    json j;
    j["device"] = {{"name", prop.name}, {"sms", prop.multiProcessorCount}, {"l2_bytes", prop.l2CacheSize}};
    j["read_bandwidth"] = measure_read_bandwidth(quick ? (size_t{2} << 30) : (size_t{8} << 30));
    const double bw = j["read_bandwidth"]["gbs_median"];
    std::printf("read bandwidth: %.0f GB/s (median), %.0f best\n", bw, j["read_bandwidth"]["gbs_best"].get<double>());

    mv::Context ctx;
    mv::prepare_variants();
    if (!chain_arg.empty()) {
      auto split = [](const std::string& a, char sep) {
        std::vector<std::string> out;
        for (size_t i = 0; i <= a.size();) {
          const size_t e = std::min(a.find(sep, i), a.size());
          if (e > i) out.push_back(a.substr(i, e - i));
          i = e + 1;
        }
        return out;
      };
      std::vector<ChainCfg> cfgs;
      for (const auto& c : split(chain_cfg_arg, ',')) {
        const auto f = split(c, ':');
        if (f.size() != 3 && f.size() != 4) throw df::Error("--chain-cfgs: PDL:L2_MB:BLOCKS_PER_SM[:CLUSTER], got " + c);
        cfgs.push_back({std::stoi(f[0]) != 0, std::stoll(f[1]), std::stoi(f[2]), f.size() == 4 ? std::stoi(f[3]) : 0});
      }
      if (cfgs.empty()) throw df::Error("--chain-cfgs: at least one configuration (the reference of --persist)");
      std::vector<mv::persist::Variant> pvars;
      for (const auto& c : split(persist_arg, ',')) {
        const auto f = split(c, ':');
        if (f.size() != 3) throw df::Error("--persist: RING:SLEEP:BLOCKS_PER_SM, got " + c);
        pvars.push_back({std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[2])});
      }
      std::vector<mv::persist2::Variant> p2vars;
      for (const auto& c : split(persist2_arg, ',')) {
        const auto f = split(c, ':');
        if (f.size() != 5 && f.size() != 6) throw df::Error("--persist2: NW:D:U:BPS:PF[:FLAGS], got " + c);
        p2vars.push_back({std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[2]), std::stoi(f[3]), std::stoi(f[4]),
                          f.size() == 6 ? std::stoi(f[5]) : 0});
      }
      const ChainShape shapes[] = {{"4b", 2560, 4096, 1024, 1024, 4096, 9728, 36},
                                   {"27b", 5120, 10240, 6144, 96, 6144, 17408, 16}};
      cudaStream_t s;
      ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
      json ch = json::array();
      for (const auto& item : split(chain_arg, ',')) {
        const auto f = split(item, ':');
        const ChainShape* sh = nullptr;
        for (const auto& c : shapes)
          if (f.size() == 2 && c.name == f[1]) sh = &c;
        GgmlType t = GgmlType::F32;
        bool found = false;
        for (GgmlType u : mt::all_weight_types())
          if (f.size() == 2 && std::string(df::type_name(u)) == f[0]) t = u, found = true;
        if (!sh || !found) throw df::Error("--chain: TYPE:SHAPE (shape 4b or 27b), got " + item);
        ch.push_back(chain(ctx, t, *sh, bw, cfgs, pvars, p2vars, s, chain_trace));
      }
      j["chain"] = ch;
      std::ofstream(out_path) << j.dump(1) << "\n";
      std::printf("wrote %s\n", out_path.c_str());
      return 0;
    }
    json val = json::array();
    for (GgmlType t : no_validate ? std::vector<GgmlType>{} : types)
      for (bool int8 : {false, true}) {
        if (int8 && !mv::int8_x_supported(t, 4096)) continue;
        val.push_back(validate(ctx, t, 1024, 4096, int8));
        const auto& v = val.back();
        std::printf("validate %-8s %s nmse_worst %.2e  bit-identical %d  get_rows exact %d\n", std::string(df::type_name(t)).c_str(),
                    int8 ? "int8-x" : "f32-x ", v["nmse_worst"].get<double>(), v["rows_bit_identical_across_n"].get<bool>(),
                    v["get_rows_exact"].get<bool>());
        std::fflush(stdout);
      }
    j["validation"] = val;

    const int64_t shapes[][2] = {{2560, 9728}, {9728, 2560}, {5120, 17408}, {17408, 5120}, {248320, 5120}};
    const std::vector<GgmlType> priority = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                            GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                            GgmlType::IQ4_XS, GgmlType::F16, GgmlType::BF16};
    cudaStream_t s;
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    json sp = json::array();
    for (GgmlType t : types) {
      const bool prio = std::find(priority.begin(), priority.end(), t) != priority.end();
      for (const auto& sh : shapes) {
        const bool head = sh[0] == 248320;
        const std::string name = std::to_string(sh[0]) + "x" + std::to_string(sh[1]);
        if (!shapes_arg.empty() && ("," + shapes_arg + ",").find("," + name + ",") == std::string::npos) continue;
        if (quick && !(sh[0] == 17408 || head)) continue;
        if (!prio && !all_shapes && !(sh[0] == 17408 || head)) continue;  // other formats: two shapes
        std::vector<int> ns = prio && sh[0] == 17408 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1};
        if (!ns_list.empty() && !head) ns = ns_list;
        sp.push_back(speed(ctx, t, sh[0], sh[1], bw, prio && !no_variants, ns, prio ? pipe_codes : std::vector<int>{},
                           pipe_ns, modes_arg, s));
        const auto& r = sp.back();
        std::printf("speed %-8s %6lld x %-6lld read %5.0f GB/s", std::string(df::type_name(t)).c_str(),
                    static_cast<long long>(sh[0]), static_cast<long long>(sh[1]),
                    r["read_kernel_same_bytes_gbs"].get<double>());
        if (r.contains("nmse_n1_int8x")) std::printf(" nmse int8-x %.1e", r["nmse_n1_int8x"].get<double>());
        if (r.contains("pipe_bits_equal_old")) {
          bool all = true;
          for (const auto& [k, v] : r["pipe_bits_equal_old"].items()) all = all && v.get<bool>();
          std::printf(" pipe bits = old n 1..8: %s", all ? "yes" : "NO");
        }
        std::printf("\n");
        for (const char* m : {"default", "int8x", "int8x_pdl", "int8x_pipe", "int8x_pipe_pdl", "int8x_rows", "int8x_rows_pdl"}) {
          if (!r.contains(m)) continue;
          std::printf("   %-15s", m);
          for (const auto& [k, v] : r[m].items())
            std::printf(" n=%s %7.1f us %5.0f GB/s", k.c_str(), v["us"].get<double>(), v["gbs"].get<double>());
          std::printf("\n");
        }
        if (r.contains("pipe_variants")) {
          std::printf("   pipe n:D/RW/U plain|pdl GB/s:");
          for (const auto& pv : r["pipe_variants"])
            std::printf(" %d:%d%d%d %.0f|%.0f r%d%s%s", pv["n"].get<int>(), pv["d"].get<int>(), pv["rw"].get<int>(),
                        pv["u"].get<int>(), pv.contains("plain") ? pv["plain"]["gbs"].get<double>() : 0.0,
                        pv["pdl"]["gbs"].get<double>(), pv.value("regs", 0), pv.value("local_bytes", 0) > 0 ? "(spills)" : "",
                        pv["bits_equal_default"].get<bool>() ? "" : "(BITS DIFFER)");
          std::printf("\n");
        }
        std::fflush(stdout);
      }
    }
    j["speed"] = sp;
    std::ofstream(out_path) << j.dump(1) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_matvec_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
