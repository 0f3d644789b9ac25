// Workbench of the prefill kernels (issue 10). GEMM (src/backend/cuda/gemm): validation of
// every weight format against the CPU reference (src/quant dequantize_ref, f64 dot; NMSE;
// every output written; every tile the same bits), then TFLOP/s per format, shape and tile
// against the f32 path the backend used before (dequantized tiles of rows + the tiled f32
// kernel). Ops at the real shapes: flash_prefill vs the decode attention kernel, the chunked
// gated delta rule vs the token-by-token one (time, and NMSE of one against the other).
// JSON to --out.
//
//   bench_prefill_cuda --out prefill_cuda.json [--quick] [--formats q4_0,q8_0]
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"
#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/delta_rule_chunked.cuh"
#include "backend/cuda/ops/flash_prefill.cuh"
#include "backend/cuda/ops/matmul.cuh"
#include "common/error.h"
#include "matvec_testing.h"

using df::GgmlType;
using nlohmann::json;
namespace mv = df::cudamv;
namespace mt = df::cudamv::testing;
namespace gm = df::cuda::gemm;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw df::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~DevBuf() { cudaFree(p); }
  float* f() const { return static_cast<float*>(p); }
  uint16_t* h() const { return static_cast<uint16_t*>(p); }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// NMSE of the GEMM for n rows against the f64 reference; every output written (poisoned first).
json validate(const mv::Context& ctx, gm::Blas& blas, GgmlType t, int64_t rows, int64_t cols, int n) {
  const auto blocks = mt::random_blocks(t, cols, rows, 2000 + static_cast<uint64_t>(t));
  const auto w = mt::dequant_rows(t, blocks.data(), cols, rows);
  const auto x = mt::random_x(n * cols, 91 + n);
  const auto ref = mt::reference(w, x, cols, rows, n);
  mv::PackedWeight W = mv::pack_weight(ctx, t, cols, rows, blocks.data());
  DevBuf dx(x.size() * 4), dxh(x.size() * 2), dy(static_cast<size_t>(n) * rows * 4);
  ck(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
  json codes = json::object();
  double worst = 0.0;
  bool identical = true;  // every tile gives the same bits (the same summation order)
  std::vector<float> first;
  for (int code = 0; code <= 4; ++code) {
    ck(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), "poison");  // NaN
    gm::convert_x_f16(dx.f(), cols, n, cols, dxh.h(), nullptr);
    if (!gm::gemm_variant(W, dxh.h(), n, dy.f(), rows, code, nullptr)) continue;
    ck(cudaDeviceSynchronize(), "gemm");
    std::vector<float> y(static_cast<size_t>(n) * rows);
    ck(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), "y");
    const double e = mt::nmse(y.data(), ref.data(), y.size());  // inf for a NaN: an unwritten output
    codes[std::to_string(code)] = e;
    if (first.empty()) first = y;
    else identical = identical && std::memcmp(first.data(), y.data(), y.size() * 4) == 0;
    worst = std::max(worst, e);
  }
  json blas_modes = json::object();  // the cuBLAS path (another summation order: nmse only)
  double blas_worst = 0.0;
  for (int mode = 1; mode <= 3; ++mode) {
    ck(cudaMemset(dy.p, 0xff, static_cast<size_t>(n) * rows * 4), "poison");
    if (!blas.gemm(W, dxh.h(), n, dy.f(), rows, nullptr, false, mode)) {
      blas_worst = INFINITY;
      continue;
    }
    ck(cudaDeviceSynchronize(), "blas");
    std::vector<float> y(static_cast<size_t>(n) * rows);
    ck(cudaMemcpy(y.data(), dy.p, y.size() * 4, cudaMemcpyDeviceToHost), "y");
    const double e = mt::nmse(y.data(), ref.data(), y.size());
    blas_modes[std::to_string(mode)] = e;
    blas_worst = std::max(blas_worst, e);
  }
  return {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols}, {"n", n},
          {"nmse_by_tile", codes}, {"worst", worst}, {"tiles_identical", identical}, {"nmse_blas", blas_modes},
          {"pass", worst < 1e-5 && identical && blas_worst < 1e-5}};
}

template <class F>
double time_ms(F&& f, int reps) {
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  f();
  f();
  ck(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    ck(cudaEventRecord(e0), "record");
    f();
    ck(cudaEventRecord(e1), "record");
    ck(cudaEventSynchronize(e1), "sync");
    float t = 0;
    ck(cudaEventElapsedTime(&t, e0, e1), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(ms);
}

json speed(gm::Blas& blas, const mv::PackedWeight& W, int n, bool old_path, int reps) {
  const GgmlType t = W.type;
  const int64_t rows = W.rows, cols = W.cols;
  const auto x = mt::random_x(static_cast<int64_t>(n) * cols, 5);
  DevBuf dx(x.size() * 4), dxh(x.size() * 2), dy(static_cast<size_t>(n) * rows * 4);
  ck(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "x");
  const double flop = 2.0 * static_cast<double>(rows) * static_cast<double>(cols) * n;
  json res = {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols}, {"n", n}};
  const double conv = time_ms([&] { gm::convert_x_f16(dx.f(), cols, n, cols, dxh.h(), nullptr); }, reps);
  res["convert_ms"] = conv;
  json tiles = json::object();
  double best = 1e30;
  int best_code = -1;
  for (int code = 0; code <= 4; ++code) {
    if (!gm::gemm_variant(W, dxh.h(), n, dy.f(), rows, code, nullptr)) continue;
    const double ms = time_ms([&] { gm::gemm_variant(W, dxh.h(), n, dy.f(), rows, code, nullptr); }, reps);
    tiles[std::to_string(code)] = {{"ms", ms}, {"tflops", flop / (ms * 1e-3) / 1e12}};
    if (code > 0 && ms < best) best = ms, best_code = code;
  }
  res["tiles"] = tiles;
  res["best_code"] = best_code;
  json bl = json::object();
  struct Variant {
    const char* name;
    int mode;
    size_t slab;
  };
  for (const Variant& vt : {Variant{"rows", 1, 0}, Variant{"rows32", 1, size_t{32} << 20},
                            Variant{"rows16", 1, size_t{16} << 20}, Variant{"cols", 2, 0}, Variant{"piped", 3, 0}}) {
    if (!blas.gemm(W, dxh.h(), n, dy.f(), rows, nullptr, false, vt.mode, vt.slab)) continue;
    const double ms = time_ms([&] { blas.gemm(W, dxh.h(), n, dy.f(), rows, nullptr, false, vt.mode, vt.slab); }, reps);
    bl[vt.name] = {{"ms", ms}, {"tflops", flop / (ms * 1e-3) / 1e12}};
  }
  {  // what the backend runs: the tuner's pick (tuned by the first call)
    gm::Tuner tuner;
    tuner.gemm(W, dxh.h(), n, dy.f(), rows, nullptr, false);
    const double ms = time_ms([&] { tuner.gemm(W, dxh.h(), n, dy.f(), rows, nullptr, false); }, reps);
    res["tuner"] = {{"pick", tuner.picked(W, n)}, {"ms", ms}, {"tflops", flop / (ms * 1e-3) / 1e12}};
  }
  res["blas"] = bl;
  res["auto_tflops_with_convert"] = flop / ((tiles["0"]["ms"].get<double>() + conv) * 1e-3) / 1e12;
  if (old_path) {  // the previous prefill path: bounded tiles of f32 rows + the tiled f32 kernel
    const int64_t R = std::max<int64_t>(64, std::min<int64_t>(rows, (int64_t{32} << 20) / (cols * 4) / 64 * 64));
    DevBuf tile(static_cast<size_t>(R * cols) * 4), iota(static_cast<size_t>(rows) * 4);
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    ck(cudaMemcpy(iota.p, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice), "ids");
    const double ms = time_ms(
        [&] {
          for (int64_t r0 = 0; r0 < rows; r0 += R) {
            const int64_t nr = std::min(R, rows - r0);
            mv::get_rows(W, static_cast<const int32_t*>(iota.p) + r0, static_cast<int>(nr), tile.f(), nullptr);
            df::cuda::launch_matmul_f32_tiled(tile.f(), cols, nr, cols, dx.f(), cols, n, dy.f() + r0, rows, nullptr);
          }
        },
        std::max(2, reps / 4));
    res["f32_path_ms"] = ms;
    res["f32_path_tflops"] = flop / (ms * 1e-3) / 1e12;
  }
  return res;
}

std::vector<float> download(const DevBuf& b, size_t n) {
  std::vector<float> v(n);
  ck(cudaMemcpy(v.data(), b.p, n * 4, cudaMemcpyDeviceToHost), "download");
  return v;
}

double nmse_f(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - ref[i]) * (static_cast<double>(a[i]) - ref[i]);
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0 ? num / den : num;
}

void upload(const DevBuf& b, const std::vector<float>& v) {
  ck(cudaMemcpy(b.p, v.data(), v.size() * 4, cudaMemcpyHostToDevice), "upload");
}

// Causal attention of n rows at positions p0 .. p0 + n - 1 over a cache filled to p0 + n.
json attention_case(int H, int Hk, int hd, int64_t p0, int64_t n) {
  const int64_t ctx = p0 + n, kvd = static_cast<int64_t>(Hk) * hd, qd = static_cast<int64_t>(H) * hd;
  mt::Rng rng(17);
  std::vector<uint16_t> kv(static_cast<size_t>(ctx * kvd));
  for (auto& h : kv) h = df::fp32_to_fp16(rng.uniform(-1.0f, 1.0f));
  std::vector<float> q(static_cast<size_t>(n * qd));
  for (auto& v : q) v = rng.uniform(-2.0f, 2.0f);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(p0 + i);
  DevBuf K(kv.size() * 2), V(kv.size() * 2), dq(q.size() * 4), o1(q.size() * 4), o2(q.size() * 4), dp(pos.size() * 4);
  ck(cudaMemcpy(K.p, kv.data(), kv.size() * 2, cudaMemcpyHostToDevice), "K");
  for (auto& h : kv) h = df::fp32_to_fp16(rng.uniform(-1.0f, 1.0f));
  ck(cudaMemcpy(V.p, kv.data(), kv.size() * 2, cudaMemcpyHostToDevice), "V");
  upload(dq, q);
  ck(cudaMemcpy(dp.p, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice), "pos");
  df::cuda::AttnArgs a;
  a.n_head = H, a.n_head_kv = Hk, a.head_dim = hd, a.scale = 1.0f / std::sqrt(static_cast<float>(hd)), a.n_ctx = ctx;
  DevBuf scratch(df::cuda::attention_scratch_floats(n, a) * 4 + 16);
  const auto* Kh = static_cast<const __half*>(K.p);
  const auto* Vh = static_cast<const __half*>(V.p);
  const auto* pp = static_cast<const int32_t*>(dp.p);
  auto flash = [&] { df::cuda::launch_flash_prefill(dq.f(), qd, n, Kh, Vh, kvd, pp, a, o1.f(), qd, nullptr); };
  auto decode = [&] {
    df::cuda::launch_attention(dq.f(), qd, n, Kh, Vh, kvd, pp, 0, a, scratch.f(), o2.f(), qd, nullptr);
  };
  const double t1 = time_ms(flash, 5), t2 = time_ms(decode, 3);
  ck(cudaDeviceSynchronize(), "attention");
  // causal FLOPs: QK^T and PV over the visible keys
  double flop = 0;
  for (int64_t i = 0; i < n; ++i) flop += 4.0 * static_cast<double>(p0 + i + 1) * hd * H;
  const double e = nmse_f(download(o1, q.size()), download(o2, q.size()));
  std::printf("attention H %d/%d hd %d rows %lld at %lld: flash %.3f ms (%.1f TFLOP/s), decode kernel %.3f ms, nmse %.2g\n",
              H, Hk, hd, static_cast<long long>(n), static_cast<long long>(p0), t1, flop / (t1 * 1e-3) / 1e12, t2, e);
  auto flash2 = [&] { df::cuda::launch_flash_prefill_stages(dq.f(), qd, n, Kh, Vh, kvd, pp, a, o2.f(), qd, 2, nullptr); };
  ck(cudaMemset(o2.p, 0xff, q.size() * 4), "poison");
  flash2();
  ck(cudaDeviceSynchronize(), "attention");
  const double e2 = nmse_f(download(o2, q.size()), download(o1, q.size())), t3 = time_ms(flash2, 5);
  std::printf("  flash with 2 K/V stages: %.3f ms (%.1f TFLOP/s), nmse vs 1 stage %.2g\n", t3,
              flop / (t3 * 1e-3) / 1e12, e2);
  return {{"n_head", H}, {"n_head_kv", Hk}, {"head_dim", hd}, {"rows", n}, {"pos0", p0}, {"flash_ms", t1},
          {"flash2_ms", t3}, {"flash2_tflops", flop / (t3 * 1e-3) / 1e12}, {"nmse_flash2_vs_flash", e2},
          {"flash_tflops", flop / (t1 * 1e-3) / 1e12}, {"decode_kernel_ms", t2}, {"nmse_flash_vs_decode", e}};
}

// The gated delta rule over n tokens: chunked vs token-by-token from the same state.
json delta_case(int Hk, int Hv, int d, int64_t n) {
  mt::Rng rng(23);
  const int64_t kd = static_cast<int64_t>(Hk) * d, vd = static_cast<int64_t>(Hv) * d;
  auto fill = [&](size_t count, float lo, float hi) {
    std::vector<float> v(count);
    for (auto& x : v) x = rng.uniform(lo, hi);
    return v;
  };
  std::vector<float> q = fill(static_cast<size_t>(n * kd), -1, 1), k = fill(static_cast<size_t>(n * kd), -1, 1);
  for (int64_t r = 0; r < n * Hk; ++r) {  // l2-normalised per head, as the model feeds them
    for (auto* m : {&q, &k}) {
      double s = 0;
      for (int i = 0; i < d; ++i) s += (*m)[static_cast<size_t>(r * d + i)] * (*m)[static_cast<size_t>(r * d + i)];
      for (int i = 0; i < d; ++i) (*m)[static_cast<size_t>(r * d + i)] /= static_cast<float>(std::sqrt(s));
    }
  }
  const auto v = fill(static_cast<size_t>(n * vd), -1, 1), g = fill(static_cast<size_t>(n * Hv), -1.0f, -0.01f),
             beta = fill(static_cast<size_t>(n * Hv), 0.05f, 0.95f), st = fill(static_cast<size_t>(vd * d), -0.1f, 0.1f);
  DevBuf dq(q.size() * 4), dk(k.size() * 4), dv(v.size() * 4), dg(g.size() * 4), db(beta.size() * 4),
      s1(st.size() * 4), s2(st.size() * 4), o1(v.size() * 4), o2(v.size() * 4);
  upload(dq, q), upload(dk, k), upload(dv, v), upload(dg, g), upload(db, beta);
  df::cuda::DeltaRuleArgs a;
  a.q = dq.f(), a.q_stride = kd, a.k = dk.f(), a.k_stride = kd, a.v = dv.f(), a.v_stride = vd;
  a.g = dg.f(), a.g_stride = Hv, a.beta = db.f(), a.beta_stride = Hv;
  a.n = n, a.d = d, a.n_k_heads = Hk, a.n_v_heads = Hv, a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  a.out_stride = vd;
  df::cuda::DeltaRuleArgs a1 = a, a2 = a;
  a1.state = s1.f(), a1.out = o1.f(), a2.state = s2.f(), a2.out = o2.f();
  upload(s1, st), upload(s2, st);
  const double t1 = time_ms([&] { df::cuda::launch_gated_delta_rule_chunked(a1, nullptr); }, 5);
  const double t2 = time_ms([&] { df::cuda::launch_gated_delta_rule(a2, nullptr); }, 3);
  upload(s1, st), upload(s2, st);  // one run of each from the same state, compared
  df::cuda::launch_gated_delta_rule_chunked(a1, nullptr);
  df::cuda::launch_gated_delta_rule(a2, nullptr);
  ck(cudaDeviceSynchronize(), "delta rule");
  const std::vector<float> ref_out = download(o1, v.size()), ref_state = download(s1, st.size());
  const double eo = nmse_f(download(o2, v.size()), ref_out);
  const double es = nmse_f(download(s2, st.size()), ref_state);
  std::printf("delta rule Hk %d Hv %d d %d n %lld: chunked %.3f ms, token kernel (%d lanes a row) %.3f ms (x%.1f), "
              "nmse out %.2g state %.2g\n",
              Hk, Hv, d, static_cast<long long>(n), t1, df::cuda::delta_rule_default_lanes(d), t2, t2 / t1, eo, es);
  json lanes = json::object();  // every lanes-per-row variant of the token kernel vs the chunked one
  bool pass = eo < 1e-8 && es < 1e-8;
  for (int g : {32, 16, 8, 4}) {
    upload(s2, st);
    ck(cudaMemset(o2.p, 0xff, v.size() * 4), "poison");
    if (!df::cuda::launch_gated_delta_rule_lanes(a2, g, nullptr)) continue;
    ck(cudaDeviceSynchronize(), "delta rule");
    const double vo = nmse_f(download(o2, v.size()), ref_out), vs = nmse_f(download(s2, st.size()), ref_state);
    const double ms = time_ms([&] { df::cuda::launch_gated_delta_rule_lanes(a2, g, nullptr); }, 3);
    std::printf("  token kernel %2d lanes a row: %.3f ms, nmse out %.2g state %.2g\n", g, ms, vo, vs);
    lanes[std::to_string(g)] = {{"ms", ms}, {"nmse_out", vo}, {"nmse_state", vs}};
    pass = pass && vo < 1e-8 && vs < 1e-8;
  }
  return {{"n_k_heads", Hk}, {"n_v_heads", Hv}, {"d", d}, {"n", n}, {"chunked_ms", t1}, {"token_ms", t2},
          {"token_lanes", lanes}, {"nmse_out", eo}, {"nmse_state", es}, {"pass", pass}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GPU prefill workbench");
  std::string out_path = "prefill_cuda.json", formats_arg;
  bool quick = false, gemm_only = false;
  std::vector<int> ns = {512, 4096};
  app.add_option("--out", out_path, "JSON output");
  app.add_flag("--gemm-only", gemm_only, "GEMM validation and speed only (no attention / delta rule)");
  app.add_option("--ns", ns, "rows of x for the speed part (comma-separated)")->delimiter(',');
  app.add_flag("--quick", quick, "fewer shapes");
  app.add_option("--formats", formats_arg, "comma-separated formats for the speed part (default: the main ones)");
  CLI11_PARSE(app, argc, argv);
  try {
    mv::Context ctx;
    gm::Blas blas;
    json j;
    json val = json::array();
    int fails = 0;
    for (GgmlType t : mt::all_weight_types())
      for (int n : {40, 300}) {
        json v = validate(ctx, blas, t, 192, 512, n);
        if (!v["pass"].get<bool>()) ++fails;
        std::printf("validate %-8s n=%3d worst nmse %.3g %s\n", std::string(df::type_name(t)).c_str(), n, v["worst"].get<double>(),
                    v["pass"].get<bool>() ? "ok" : "FAIL");
        val.push_back(v);
      }
    j["validation"] = val;
    json ops = json::array();
    if (!gemm_only) {
    for (auto [Hk, Hv, d, n] : std::vector<std::tuple<int, int, int, int64_t>>{
             {16, 48, 128, 1}, {16, 48, 128, 512}, {16, 48, 128, 4096}, {2, 4, 64, 1000}, {1, 2, 32, 100}}) {
      json r = delta_case(Hk, Hv, d, n);
      if (!r["pass"].get<bool>()) ++fails;
      ops.push_back(r);
    }
    for (auto [H, Hk, hd, p0, n] : std::vector<std::tuple<int, int, int, int64_t, int64_t>>{
             {32, 8, 128, 0, 512}, {32, 8, 128, 7680, 512}, {24, 4, 256, 0, 512}, {24, 4, 256, 7680, 512},
             {16, 8, 64, 100, 333}}) {
      json r = attention_case(H, Hk, hd, p0, n);
      if (!(r["nmse_flash_vs_decode"].get<double>() < 1e-5) || !(r["nmse_flash2_vs_flash"].get<double>() < 1e-5)) ++fails;
      ops.push_back(r);
    }
    }
    j["ops"] = ops;
    std::vector<GgmlType> fmts = {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K,
                                  GgmlType::Q5_K};
    if (!formats_arg.empty()) {
      fmts.clear();
      size_t p = 0;
      while (p <= formats_arg.size()) {
        const size_t e = std::min(formats_arg.find(',', p), formats_arg.size());
        const std::string name = formats_arg.substr(p, e - p);
        bool found = false;
        for (GgmlType t : mt::all_weight_types())
          if (lower(name) == lower(std::string(df::type_name(t)))) fmts.push_back(t), found = true;
        if (!found) throw df::Error("unknown format " + name);
        p = e + 1;
      }
    }
    // rows x cols = outputs x inputs: qwen3 4B (q, kv, gate/up, down, o) and qwen35 27B (ffn
    // gate/up, down; linear attention qkv, z, out; full attention q+gate).
    std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 2560},  {1024, 2560},  {9728, 2560}, {2560, 9728},
                                                       {2560, 4096},  {17408, 5120}, {5120, 17408}, {10240, 5120},
                                                       {6144, 5120},  {5120, 6144},  {12288, 5120}};
    if (quick) shapes = {{9728, 2560}, {17408, 5120}};
    json sp = json::array();
    const std::vector<std::pair<int64_t, int64_t>> few = {{9728, 2560}, {17408, 5120}};
    for (GgmlType t : fmts)
      for (auto [rows, cols] : (t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || quick) ? shapes : few) {
        const auto blocks = mt::random_blocks(t, cols, rows, 3000 + static_cast<uint64_t>(t));
        const mv::PackedWeight W = mv::pack_weight(ctx, t, cols, rows, blocks.data());
        for (int n : ns) {
          json r = speed(blas, W, n, n == 512 && !gemm_only && (t == GgmlType::Q8_0 || t == GgmlType::Q4_0), 10);
          auto blas_tf = [&](const char* mode) {
            return r["blas"].contains(mode) ? r["blas"][mode]["tflops"].get<double>() : 0.0;
          };
          std::printf("speed %-6s %6lld x %6lld n=%5d  tile %6.1f (best %d %6.1f) blas rows %6.1f r32 %6.1f r16 %6.1f "
                      "cols %6.1f piped %6.1f | tuner pick %d %6.1f TFLOP/s %.3f ms%s\n",
                      std::string(df::type_name(t)).c_str(), static_cast<long long>(rows), static_cast<long long>(cols), n,
                      r["tiles"]["0"]["tflops"].get<double>(), r["best_code"].get<int>(),
                      r["tiles"][std::to_string(r["best_code"].get<int>())]["tflops"].get<double>(), blas_tf("rows"),
                      blas_tf("rows32"), blas_tf("rows16"), blas_tf("cols"), blas_tf("piped"),
                      r["tuner"]["pick"].get<int>(), r["tuner"]["tflops"].get<double>(), r["tuner"]["ms"].get<double>(),
                      r.contains("f32_path_tflops")
                          ? (" | old f32 path " + std::to_string(r["f32_path_tflops"].get<double>()) + " TFLOP/s").c_str()
                          : "");
          sp.push_back(r);
        }
      }
    j["speed"] = sp;
    std::ofstream(out_path) << j.dump(1) << "\n";
    std::printf("validation failures: %d\n", fails);
    return fails ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
