// Workbench of the tensor-core int8 matvec at n = 1..8 rows (mvmma/mma_matvec.cuh, issue 11)
// beside the reference, main's dp4a matvec (cudamv::matvec: the pipelined int8-x kernels,
// PDL), for Q4_0 and Q8_0 on the real shapes. Per type and shape:
//   validation: the mma kernel's y against a CPU emulation of its exact arithmetic (x rounded
//     as xq.cuh, int32 block dots, its float order: bit for bit), rows of every n = 1..8 equal
//     to the x row alone (bit for bit), NMSE of both kernels against the f64 dot of the
//     dequantized weights and unrounded x, and how many outputs equal the dp4a kernel's bits;
//   speed: us per call and GB/s (ggml weight bytes / time) at each n, graphs of back-to-back
//     launches with PDL over weight copies cycling through >= 640 MB (as bench_matvec_cuda),
//     the mma kernel at its default splits and pipeline depth and at the variants;
//   the kernels of mma_planar.cuh beside it (helper mvmma2): the same arithmetic reading the
//     tile layout with wk = 1 instances ("tile2"), and reading the dp4a kernel's own planar
//     PackedWeight ("planar_shfl", "planar_ld32"), each validated as above and against the
//     tile kernel's bits (every output, n = 8), then timed at every (ks, wk).
//
//   bench_mvmma_cuda --out mvmma.json [--types q4_0,q8_0] [--shapes 2560x9728,...] [--ns 1,2,3,4,8]
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

#include "backend/cuda/matvec/matvec.cuh"
#include "common/error.h"
#include "matvec_testing.h"
#include "mvmma/mma2_dispatch.h"
#include "mvmma/mma_matvec.cuh"

using df::GgmlType;
using nlohmann::json;
namespace mv = df::cudamv;
namespace mt = df::cudamv::testing;
namespace mm = df::mvmma;
namespace m2 = df::mvmma2;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw df::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t n) { ck(cudaMalloc(&p, n), "alloc"); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  float* f() const { return static_cast<float*>(p); }
  uint8_t* b() const { return static_cast<uint8_t*>(p); }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median time of one launch (ms): k launches (launch(i): the i-th, cycling over copies)
// captured in one graph, 5 timed replays.
template <class Launch>
double time_launches(int copies, Launch&& launch, cudaStream_t s) {
  const int k = copies * std::max(1, 48 / copies);
  for (int i = 0; i < copies; ++i) launch(i, s);
  ck(cudaStreamSynchronize(s), "warm-up");
  cudaGraph_t g;
  cudaGraphExec_t ge;
  ck(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < k; ++i) launch(i % copies, s);
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

// ---- the mma kernel's instances: (F, N, D) ----
constexpr int kDs[] = {2, 3};

template <class F, int N, int D>
void prepare_one() {
  mm::prepare<F, N, D>();
}
template <class F, int... Ns>
void prepare_ns(std::integer_sequence<int, Ns...>) {
  ((prepare_one<F, Ns + 1, 2>(), prepare_one<F, Ns + 1, 3>()), ...);
}
void prepare_all() {
  prepare_ns<mm::MmaQ4_0>(std::make_integer_sequence<int, 8>{});
  prepare_ns<mm::MmaQ8_0>(std::make_integer_sequence<int, 8>{});
}

template <class F, int... Ns>
cudaError_t launch_ns(std::integer_sequence<int, Ns...>, const mm::View& v, const float* x, float* y, float* part,
                      unsigned* cnt, int n, int d, int ks, int wk, bool pdl, cudaStream_t s) {
  cudaError_t r = cudaErrorInvalidValue;
  ((n == Ns + 1 ? (r = d == 2 ? mm::launch<F, Ns + 1, 2>(v, x, y, part, cnt, ks, wk, pdl, s)
                              : mm::launch<F, Ns + 1, 3>(v, x, y, part, cnt, ks, wk, pdl, s),
                   true)
                : false) ||
   ...);
  return r;
}
cudaError_t launch_mma(GgmlType t, const mm::View& v, const float* x, float* y, float* part, unsigned* cnt, int n, int d,
                       int ks, int wk, bool pdl, cudaStream_t s) {
  if (t == GgmlType::Q4_0)
    return launch_ns<mm::MmaQ4_0>(std::make_integer_sequence<int, 8>{}, v, x, y, part, cnt, n, d, ks, wk, pdl, s);
  return launch_ns<mm::MmaQ8_0>(std::make_integer_sequence<int, 8>{}, v, x, y, part, cnt, n, d, ks, wk, pdl, s);
}

template <class F, int... Ns>
json attrs_ns(std::integer_sequence<int, Ns...>) {
  json a = json::array();
  auto one = [&](auto kernel, int n, int d) {
    cudaFuncAttributes at{};
    if (cudaFuncGetAttributes(&at, kernel) == cudaSuccess)
      a.push_back({{"n", n}, {"d", d}, {"regs", at.numRegs}, {"local_bytes", at.localSizeBytes}});
  };
  ((one(mm::mma_matvec<F, Ns + 1, 2>, Ns + 1, 2), one(mm::mma_matvec<F, Ns + 1, 3>, Ns + 1, 3)), ...);
  return a;
}

// The kernels compared: mvmma's tile kernel (src < 0) at D = 2 and 3, and the mma_planar.cuh
// sources at the type's depth.
struct Kern {
  std::string name;
  int src, d;
};
std::vector<Kern> kernels_of(GgmlType t) {
  const int d2 = t == GgmlType::Q4_0 ? m2::kDepthQ4_0 : m2::kDepthQ8_0;
  return {{"tile_d2", -1, 2}, {"tile_d3", -1, 3}, {"tile2", 0, d2}, {"planar_shfl", 1, d2}, {"planar_ld32", 2, d2}};
}

// ---- CPU emulation of the mma kernel (x rounding of xq.cuh, its float order) ----
struct XRound {
  std::vector<int8_t> q;   // [n][cols]
  std::vector<float> d;    // [n][cols / 32]
};
XRound round_x(const std::vector<float>& x, int n, int64_t cols) {
  XRound r;
  r.q.resize(static_cast<size_t>(n * cols));
  r.d.resize(static_cast<size_t>(n * cols / 32));
  for (int j = 0; j < n; ++j)
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* v = x.data() + j * cols + b * 32;
      float am = 0.0f;
      for (int k = 0; k < 32; ++k) am = std::fmax(am, std::fabs(v[k]));
      r.d[j * (cols / 32) + b] = df::fp16_to_fp32(df::fp32_to_fp16(am / 127.0f));
      const float mul = am > 0.0f ? 127.0f / am : 0.0f;
      for (int k = 0; k < 32; ++k) {
        const float p = v[k] * mul;
        r.q[j * cols + b * 32 + k] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(p))));
      }
    }
  return r;
}

// y[j][r] for the rows `rows_idx`, as the kernel computes it with ks splits.
std::vector<float> emulate(GgmlType t, const uint8_t* blocks, int64_t rows, int64_t cols, const XRound& xr, int n, int ks,
                           int wk, const std::vector<int64_t>& rows_idx) {
  const int64_t nb = cols / 32, KG = cols / 128;
  std::vector<float> y(rows_idx.size() * n);
  const bool q4 = t == GgmlType::Q4_0;
  const size_t bb = q4 ? sizeof(df::BlockQ4_0) : sizeof(df::BlockQ8_0);
  for (size_t ri = 0; ri < rows_idx.size(); ++ri) {
    const int64_t r = rows_idx[ri];
    for (int j = 0; j < n; ++j) {
      float total = 0.0f;
      for (int s = 0; s < ks; ++s) {
        const int64_t kg0 = s * KG / ks, kg1 = (s + 1) * KG / ks;
        float split = 0.0f;
        for (int w = 0; w < wk; ++w) {
        const int64_t w0 = kg0 + w * (kg1 - kg0) / wk, w1 = kg0 + (w + 1) * (kg1 - kg0) / wk;
        float acc = 0.0f;
        for (int64_t blk = w0 * 4; blk < w1 * 4; ++blk) {
          const uint8_t* src = blocks + (r * nb + blk) * bb;
          uint16_t dh;
          std::memcpy(&dh, src, 2);
          int dot = 0;
          for (int k = 0; k < 32; ++k) {
            const int w = q4 ? ((k < 16 ? src[2 + k] & 15 : src[2 + k - 16] >> 4) - 8) : static_cast<int8_t>(src[2 + k]);
            dot += w * xr.q[j * cols + blk * 32 + k];
          }
          const float d = df::fp16_to_fp32(dh) * xr.d[j * nb + blk];
          acc = std::fmaf(d, static_cast<float>(dot), acc);
        }
        split = w == 0 ? acc : split + acc;
        }
        total = s == 0 ? split : total + split;
      }
      y[ri * n + j] = total;
    }
  }
  (void)rows;
  return y;
}

mv::PackedWeight clone(const mv::PackedWeight& src) {
  mv::PackedWeight c;
  c.type = src.type, c.cols = src.cols, c.rows = src.rows, c.bytes = src.bytes;
  c.q_row_bytes = src.q_row_bytes, c.m_offset = src.m_offset, c.m_row_bytes = src.m_row_bytes;
  c.tables = src.tables;
  c.int8_x = src.int8_x, c.pdl = src.pdl, c.pipe = src.pipe, c.pipe_rows = src.pipe_rows;
  c.l2_prefetch = src.l2_prefetch, c.blocks_per_sm = src.blocks_per_sm;
  void* d = nullptr;
  ck(cudaMalloc(&d, src.bytes), "clone");
  c.data = static_cast<uint8_t*>(d);
  c.owns = true;
  ck(cudaMemcpy(c.data, src.data, src.bytes, cudaMemcpyDeviceToDevice), "clone copy");
  return c;
}

json run_shape(const mv::Context& ctx, GgmlType t, int64_t rows, int64_t cols, const std::vector<int>& ns, double bw,
               bool variants, cudaStream_t s) {
  if (!mm::shape_ok(rows, cols)) throw df::Error("shape not a multiple of 16 x 128");
  const auto blocks = mt::random_blocks(t, cols, rows, 4242 + static_cast<uint64_t>(rows) + static_cast<uint64_t>(t));
  const double wbytes = static_cast<double>(df::row_bytes(t, cols)) * static_cast<double>(rows);
  const int copies = static_cast<int>(std::min<double>(32, (640.0 * (1 << 20)) / wbytes + 1));
  // dp4a reference: main's matvec (pack_weight of the default Context)
  std::vector<mv::PackedWeight> dw;
  dw.push_back(mv::pack_weight(ctx, t, cols, rows, blocks.data()));
  for (int i = 1; i < copies; ++i) dw.push_back(clone(dw[0]));
  // mma layout
  const size_t qb = mm::quant_plane_bytes(t, rows, cols), sb = mm::scale_plane_bytes(rows, cols);
  std::vector<uint8_t> host(qb + sb);
  mm::pack(t, rows, cols, blocks.data(), host.data(), host.data() + qb);
  std::vector<DevBuf*> mw;
  for (int i = 0; i < copies; ++i) {
    mw.push_back(new DevBuf(qb + sb));
    ck(cudaMemcpy(mw.back()->p, host.data(), qb + sb, cudaMemcpyHostToDevice), "mma weights");
  }
  auto view = [&](int i) { return mm::View{mw[i]->b(), mw[i]->b() + qb, rows, cols}; };
  // mma_planar.cuh: the tile planes, or the dp4a kernel's PackedWeight as it is
  const int64_t nb = cols / 32;
  if (dw[0].q_row_bytes != static_cast<size_t>(nb) * (t == GgmlType::Q4_0 ? 16 : 32) || dw[0].m_row_bytes < static_cast<size_t>(nb) * 2 ||
      dw[0].m_row_bytes % 8 != 0)
    throw df::Error("PackedWeight is not the planar Q4_0 / Q8_0 layout");
  auto wview = [&](int i, bool planar) {
    if (!planar) return m2::WView{mw[i]->b(), mw[i]->b() + qb, 0, 0, rows, cols};
    return m2::WView{dw[i].data, dw[i].data + dw[i].m_offset, static_cast<int64_t>(dw[i].q_row_bytes),
                     static_cast<int64_t>(dw[i].m_row_bytes), rows, cols};
  };
  const std::vector<Kern> kerns = kernels_of(t);
  const int d2 = kerns[2].d;
  const int ks0 = mm::default_splits(rows, cols), KG = static_cast<int>(cols / 128);
  // (ks, wk) configurations: ks CTAs per row tile (added by the last through L2), wk warps per
  // row tile within a CTA (added in shared memory)
  std::vector<std::pair<int, int>> cfgs;
  auto add_cfg = [&](int ks, int wk) {
    if (ks < 1 || ks * wk > KG) return;
    for (auto& c : cfgs)
      if (c.first == ks && c.second == wk) return;
    cfgs.emplace_back(ks, wk);
  };
  add_cfg(ks0, 1);
  if (variants) {
    add_cfg(ks0 / 2, 2), add_cfg(ks0 / 4, 4), add_cfg(1, 4), add_cfg(1, 8), add_cfg(2, 4), add_cfg(2, 8), add_cfg(ks0 * 2, 1);
  }
  DevBuf part(static_cast<size_t>(64) * 8 * rows * 4), cnt(static_cast<size_t>(rows / 16) * 4);
  ck(cudaMemset(cnt.p, 0, static_cast<size_t>(rows / 16) * 4), "cnt");
  const auto x = mt::random_x(8 * cols, 99);
  DevBuf dx(x.size() * 4), dy(static_cast<size_t>(8 * rows) * 4), dy1(static_cast<size_t>(rows) * 4);
  ck(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
  auto mma = [&](int i, int n, int d, std::pair<int, int> c, const float* xp, float* yp, cudaStream_t st) {
    ck(launch_mma(t, view(i), xp, yp, part.f(), static_cast<unsigned*>(cnt.p), n, d, c.first, c.second, true, st), "mma launch");
  };
  auto run_k = [&](const Kern& k, int i, int n, std::pair<int, int> c, const float* xp, float* yp, cudaStream_t st) {
    if (k.src < 0) return mma(i, n, k.d, c, xp, yp, st);
    const auto src = static_cast<m2::Src>(k.src);
    const m2::WView wv = wview(i, src != m2::Src::Tile);
    ck(t == GgmlType::Q4_0 ? m2::launch_q4_0(src, wv, xp, yp, part.f(), static_cast<unsigned*>(cnt.p), n, c.first, c.second, true, st)
                           : m2::launch_q8_0(src, wv, xp, yp, part.f(), static_cast<unsigned*>(cnt.p), n, c.first, c.second, true, st),
       "mma2 launch");
  };
  auto fetch = [&](float* dp, int64_t count) {
    std::vector<float> h(static_cast<size_t>(count));
    ck(cudaStreamSynchronize(s), "sync");
    ck(cudaMemcpy(h.data(), dp, count * 4, cudaMemcpyDeviceToHost), "fetch");
    return h;
  };
  json res = {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols}, {"weight_bytes", wbytes},
              {"copies", copies}, {"splits", ks0}};

  // -- validation --
  std::vector<int64_t> vr;
  for (int64_t r = 0; r < std::min<int64_t>(rows, 48); ++r) vr.push_back(r);
  for (int64_t r = rows - 16; r < rows; ++r) vr.push_back(r);
  const XRound xr = round_x(x, 8, cols);
  std::vector<std::vector<float>> w;  // the sampled rows dequantized (CPU reference)
  for (int64_t r : vr) w.push_back(mt::dequant_rows(t, blocks.data() + df::row_bytes(t, cols) * static_cast<size_t>(r), cols, 1));
  json val = json::object(), cval = json::array();
  bool all_alone = true;
  int64_t all_bad = 0;
  int64_t all_tile_bits_differ = 0;
  for (auto c : cfgs) {
  const auto em = emulate(t, blocks.data(), rows, cols, xr, 8, c.first, c.second, vr);
  std::vector<float> tile8;  // mvmma's tile kernel at n = 8, D = the mma_planar depth
  for (const Kern& k : kerns) {
    const int d = k.d;
    std::vector<std::vector<float>> yn(9);
    for (int n = 1; n <= 8; ++n) {
      ck(cudaMemset(dy.p, 0xff, static_cast<size_t>(8 * rows) * 4), "poison");
      ck(cudaDeviceSynchronize(), "poison");
      run_k(k, 0, n, c, dx.f(), dy.f(), s);
      yn[n] = fetch(dy.f(), n * rows);
    }
    bool rows_alone = true;
    for (int j = 0; j < 8; ++j) {
      ck(cudaMemset(dy1.p, 0xff, static_cast<size_t>(rows) * 4), "poison");
      ck(cudaDeviceSynchronize(), "poison");
      run_k(k, 0, 1, c, dx.f() + j * cols, dy1.f(), s);
      const auto y1 = fetch(dy1.f(), rows);
      for (int n = j + 1; n <= 8; ++n) rows_alone = rows_alone && std::memcmp(y1.data(), yn[n].data() + j * rows, rows * 4) == 0;
    }
    int64_t em_bad = 0;
    for (size_t ri = 0; ri < vr.size(); ++ri)
      for (int j = 0; j < 8; ++j) em_bad += std::memcmp(&em[ri * 8 + j], &yn[8][j * rows + vr[ri]], 4) != 0;
    all_alone = all_alone && rows_alone, all_bad += em_bad;
    json cv = {{"kernel", k.name}, {"ks", c.first}, {"wk", c.second}, {"d", d}, {"rows_of_every_n_equal_row_alone", rows_alone},
               {"emulation_mismatches", em_bad}, {"emulated_outputs", vr.size() * 8}};
    if (k.src < 0 && d == d2) tile8 = yn[8];
    if (k.src >= 0) {
      int64_t differ = 0;
      for (int64_t i = 0; i < 8 * rows; ++i) differ += std::memcmp(&tile8[i], &yn[8][i], 4) != 0;
      cv["outputs_differing_from_tile_kernel_n8"] = differ;
      all_tile_bits_differ += differ;
    }
    cval.push_back(cv);
    if (k.src < 0 && d == kDs[0] && c == cfgs[0]) {
      // NMSE against f64 (sampled rows, n = 8), and the dp4a kernel beside it
      std::vector<double> ref(vr.size() * 8);
      for (size_t ri = 0; ri < vr.size(); ++ri)
        for (int j = 0; j < 8; ++j) {
          double acc = 0.0;
          for (int64_t cc = 0; cc < cols; ++cc) acc += static_cast<double>(w[ri][cc]) * x[j * cols + cc];
          ref[ri * 8 + j] = acc;
        }
      DevBuf dyd(static_cast<size_t>(8 * rows) * 4);
      mv::matvec(dw[0], dx.f(), dyd.f(), 8, s);
      const auto yd = fetch(dyd.f(), 8 * rows);
      std::vector<float> a(vr.size() * 8), b(vr.size() * 8);
      for (size_t ri = 0; ri < vr.size(); ++ri)
        for (int j = 0; j < 8; ++j) a[ri * 8 + j] = yn[8][j * rows + vr[ri]], b[ri * 8 + j] = yd[j * rows + vr[ri]];
      val["nmse_mma_n8"] = mt::nmse(a.data(), ref.data(), a.size());
      val["nmse_dp4a_n8"] = mt::nmse(b.data(), ref.data(), b.size());
      int64_t same = 0;
      double maxrel = 0.0;
      for (int64_t i = 0; i < 8 * rows; ++i) {
        same += std::memcmp(&yd[i], &yn[8][i], 4) == 0;
        maxrel = std::max(maxrel, std::fabs(double(yd[i]) - yn[8][i]) / (std::fabs(double(yd[i])) + 1e-30));
      }
      val["equal_dp4a_bits_n8"] = same;
      val["outputs_n8"] = 8 * rows;
      val["max_rel_diff_vs_dp4a_n8"] = maxrel;
    }
  }
  }
  val["configs"] = cval;
  val["all_outputs_differing_from_tile_kernel"] = all_tile_bits_differ;
  val["all_rows_of_every_n_equal_row_alone"] = all_alone;
  val["all_emulation_mismatches"] = all_bad;
  res["validation"] = val;

  // -- speed --
  json sp = json::object();
  for (int n : ns) {
    json one;
    const double ms_d = time_launches(copies, [&](int i, cudaStream_t st) { mv::matvec(dw[i], dx.f(), dy.f(), n, st); }, s);
    one["dp4a"] = {{"us", ms_d * 1e3}, {"gbs", wbytes / (ms_d * 1e-3) / 1e9}};
    json mvar = json::array(), bests = json::object();
    std::string line;
    for (const Kern& k : kerns) {
      double best = 1e30;
      std::string best_cfg;
      for (auto c : cfgs) {
        const double ms = time_launches(copies, [&](int i, cudaStream_t st) { run_k(k, i, n, c, dx.f(), dy.f(), st); }, s);
        mvar.push_back({{"kernel", k.name}, {"ks", c.first}, {"wk", c.second}, {"d", k.d}, {"us", ms * 1e3},
                        {"gbs", wbytes / (ms * 1e-3) / 1e9}});
        if (ms < best) best = ms, best_cfg = std::to_string(c.first) + "/" + std::to_string(c.second) + "/" + std::to_string(k.d);
      }
      bests[k.name] = {{"us", best * 1e3}, {"cfg_ks_wk_d", best_cfg}, {"over_dp4a_time", best / ms_d}};
      char buf[96];
      std::snprintf(buf, sizeof buf, ", %s %.1f (%s)", k.name.c_str(), best * 1e3, best_cfg.c_str());
      line += buf;
    }
    one["mma"] = mvar;
    one["best"] = bests;
    sp[std::to_string(n)] = one;
    std::printf("%s %lldx%lld n=%d: dp4a %.1f us%s\n", std::string(df::type_name(t)).c_str(), static_cast<long long>(rows),
                static_cast<long long>(cols), n, ms_d * 1e3, line.c_str());
    std::fflush(stdout);
  }
  res["speed"] = sp;
  for (auto* p : mw) delete p;
  (void)bw;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("tensor-core int8 matvec workbench");
  std::string out_path = "mvmma.json", types_arg = "q4_0,q8_0", shapes_arg = "2560x9728,9728x2560,5120x17408,17408x5120",
              ns_arg = "1,2,4,8";
  bool no_variants = false;
  app.add_option("--out", out_path, "JSON output file");
  app.add_option("--types", types_arg, "q4_0 and/or q8_0");
  app.add_option("--shapes", shapes_arg, "ROWSxCOLS, comma-separated");
  app.add_option("--ns", ns_arg, "row counts to time");
  app.add_flag("--no-variants", no_variants, "only the default splits");
  CLI11_PARSE(app, argc, argv);
  try {
    auto split = [](const std::string& a) {
      std::vector<std::string> v;
      for (size_t i = 0; i < a.size();) {
        const size_t e = std::min(a.find(',', i), a.size());
        if (e > i) v.push_back(a.substr(i, e - i));
        i = e + 1;
      }
      return v;
    };
    std::vector<int> ns;
    for (const auto& s : split(ns_arg)) {
      const int n = std::stoi(s);
      if (n < 1 || n > 8) throw df::Error("--ns: " + s + " outside [1, 8]");
      ns.push_back(n);
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) throw df::Error("no CUDA device");
    cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "properties");
    prepare_all();
    m2::prepare_q4_0();
    m2::prepare_q8_0();
    mv::Context ctx;
    cudaStream_t s;
    ck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    json j;
    j["device"] = {{"name", prop.name}, {"sms", prop.multiProcessorCount}};
    j["kernel_attrs"] = {{"q4_0", attrs_ns<mm::MmaQ4_0>(std::make_integer_sequence<int, 8>{})},
                         {"q8_0", attrs_ns<mm::MmaQ8_0>(std::make_integer_sequence<int, 8>{})}};
    auto attrs2 = [](const std::vector<m2::Attr>& v) {
      json a = json::array();
      for (const auto& e : v)
        a.push_back({{"kernel", m2::src_name(e.src)}, {"n", e.n}, {"wk_split_instance", e.kwk}, {"regs", e.regs},
                     {"local_bytes", e.local_bytes}});
      return a;
    };
    j["kernel_attrs_mma2"] = {{"q4_0", attrs2(m2::attrs_q4_0())}, {"q8_0", attrs2(m2::attrs_q8_0())}};
    json shapes = json::array();
    for (const auto& tn : split(types_arg)) {
      const GgmlType t = tn == "q4_0" ? GgmlType::Q4_0 : tn == "q8_0" ? GgmlType::Q8_0 : throw df::Error("--types: " + tn);
      for (const auto& sh : split(shapes_arg)) {
        const size_t xp = sh.find('x');
        if (xp == std::string::npos) throw df::Error("--shapes: " + sh);
        const int64_t rows = std::stoll(sh.substr(0, xp)), cols = std::stoll(sh.substr(xp + 1));
        shapes.push_back(run_shape(ctx, t, rows, cols, ns, 0.0, !no_variants, s));
        std::ofstream(out_path) << json{{"partial", true}, {"shapes", shapes}}.dump(1);
      }
    }
    j["shapes"] = shapes;
    std::ofstream(out_path) << j.dump(1) << "\n";
    std::printf("wrote %s\n", out_path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
