// Workbench of the prefill GEMM (src/backend/cuda/gemm): validation of every weight format
// against the CPU reference (src/quant dequantize_ref, f64 dot; NMSE; every output written),
// then TFLOP/s per format, shape and tile against the f32 path the backend used before
// (dequantized tiles of rows + the tiled f32 kernel). JSON to --out.
//
//   bench_gemm_cuda --out gemm_cuda.json [--quick] [--formats q4_0,q8_0]
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
#include <vector>

#include "backend/cuda/gemm/gemm.cuh"
#include "backend/cuda/matvec/matvec.cuh"
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
json validate(const mv::Context& ctx, GgmlType t, int64_t rows, int64_t cols, int n) {
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
  return {{"type", std::string(df::type_name(t))}, {"rows", rows}, {"cols", cols}, {"n", n},
          {"nmse_by_tile", codes}, {"worst", worst}, {"tiles_identical", identical},
          {"pass", worst < 1e-5 && identical}};
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

json speed(const mv::PackedWeight& W, int n, bool old_path, int reps) {
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("GPU prefill GEMM workbench");
  std::string out_path = "gemm_cuda.json", formats_arg;
  bool quick = false;
  app.add_option("--out", out_path, "JSON output");
  app.add_flag("--quick", quick, "fewer shapes");
  app.add_option("--formats", formats_arg, "comma-separated formats for the speed part (default: the main ones)");
  CLI11_PARSE(app, argc, argv);
  try {
    mv::Context ctx;
    json j;
    json val = json::array();
    int fails = 0;
    for (GgmlType t : mt::all_weight_types())
      for (int n : {40, 300}) {
        json v = validate(ctx, t, 192, 512, n);
        if (!v["pass"].get<bool>()) ++fails;
        std::printf("validate %-8s n=%3d worst nmse %.3g %s\n", df::type_name(t), n, v["worst"].get<double>(),
                    v["pass"].get<bool>() ? "ok" : "FAIL");
        val.push_back(v);
      }
    j["validation"] = val;
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
          if (lower(name) == lower(df::type_name(t))) fmts.push_back(t), found = true;
        if (!found) throw df::Error("unknown format " + name);
        p = e + 1;
      }
    }
    // rows x cols = outputs x inputs: qwen3 4B (q, kv, gate/up, down) and qwen35 27B (ffn).
    std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 2560}, {1024, 2560}, {9728, 2560}, {2560, 9728},
                                                       {17408, 5120}, {5120, 17408}};
    if (quick) shapes = {{9728, 2560}, {17408, 5120}};
    json sp = json::array();
    for (GgmlType t : fmts)
      for (auto [rows, cols] : shapes) {
        const auto blocks = mt::random_blocks(t, cols, rows, 3000 + static_cast<uint64_t>(t));
        const mv::PackedWeight W = mv::pack_weight(ctx, t, cols, rows, blocks.data());
        for (int n : {512, 4096}) {
          json r = speed(W, n, n == 512 && (t == GgmlType::Q8_0 || t == GgmlType::Q4_0), 10);
          std::printf("speed %-6s %6lld x %6lld n=%5d  auto %.3f ms %6.1f TFLOP/s (best tile %d)  convert %.3f ms%s\n",
                      df::type_name(t), static_cast<long long>(rows), static_cast<long long>(cols), n,
                      r["tiles"]["0"]["ms"].get<double>(), r["tiles"]["0"]["tflops"].get<double>(),
                      r["best_code"].get<int>(), r["convert_ms"].get<double>(),
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
