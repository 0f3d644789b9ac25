// Workbench of the decode / verify attention kernels over the F16 KV cache (issue 9; helper
// attn). Reference: the v1 slice kernel (ops/attention.cuh, one block per query head); variant:
// the GQA kernel (ops/attention_gqa.cuh, one block per key/value head serving its group). Both
// are launched as the backend launches them (the fused last-block merge with counters, PDL),
// 1 and 8 rows (decode, a verify of 8), at the real head shapes of qwen3 4B (32/8 heads, hd
// 128) and qwen35 27B (24/4, hd 256) and 64, 600, 2048, 8192 cached positions (the cache
// capacity as `diskformer bench` sizes it: max(4096, positions + 129)).
// Validation: each kernel against an f64 CPU reference (NMSE over every head of the first and
// the last row), each kernel's 8-row call against its rows launched alone (bits), gqa256 = gqa.
// Timing: a CUDA graph of 64 back-to-back launches, replayed; us per call, and GB/s of the
// distinct K/V bytes the call reads (positions x kv_dim x 2 halves, once for all rows).
//
//   bench_attn_cuda --out attn_cuda.json [--reps 20]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/ops/attention.cuh"
#include "backend/cuda/ops/attention_gqa.cuh"
#include "common/error.h"

using nlohmann::json;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw df::Error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

struct Shape {
  const char* name;
  int32_t n_head, n_head_kv, head_dim;
};

// f64 reference of row r's output (all heads): softmax(q . K[0..last] * scale) V.
std::vector<double> reference(const std::vector<float>& q, const std::vector<__half>& K, const std::vector<__half>& V,
                              const Shape& s, int64_t last, float scale) {
  const int64_t hd = s.head_dim, kvd = static_cast<int64_t>(s.n_head_kv) * hd;
  std::vector<double> out(static_cast<size_t>(s.n_head * hd), 0.0), sc(static_cast<size_t>(last + 1));
  for (int h = 0; h < s.n_head; ++h) {
    const int64_t hk = h / (s.n_head / s.n_head_kv);
    double m = -INFINITY;
    for (int64_t p = 0; p <= last; ++p) {
      double d = 0;
      for (int64_t e = 0; e < hd; ++e)
        d += static_cast<double>(q[h * hd + e] * scale) * static_cast<double>(__half2float(K[p * kvd + hk * hd + e]));
      sc[p] = d;
      m = std::max(m, d);
    }
    double l = 0;
    for (int64_t p = 0; p <= last; ++p) l += (sc[p] = std::exp(sc[p] - m));
    for (int64_t p = 0; p <= last; ++p)
      for (int64_t e = 0; e < hd; ++e) out[h * hd + e] += sc[p] / l * __half2float(V[p * kvd + hk * hd + e]);
  }
  return out;
}

double nmse(const std::vector<double>& ref, const float* got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = ref[i] - got[i];
    num += d * d, den += ref[i] * ref[i];
  }
  return den > 0 ? num / den : num;
}

// Both kernels on one case (the f64 reference computed once).
json run_case(const Shape& s, int64_t positions, int64_t rows, int reps) {
  const int64_t hd = s.head_dim, kvd = static_cast<int64_t>(s.n_head_kv) * hd, qd = static_cast<int64_t>(s.n_head) * hd;
  const int64_t n_ctx = std::max<int64_t>(4096, positions + 129);
  df::cuda::AttnArgs a;
  a.n_head = s.n_head, a.n_head_kv = s.n_head_kv, a.head_dim = s.head_dim;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.n_ctx = n_ctx;
  const int64_t filled = positions + rows;  // rows at positions `positions` .. + rows - 1
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<__half> K(static_cast<size_t>(filled * kvd)), V(K.size());
  for (auto& x : K) x = __float2half(nd(rng));
  for (auto& x : V) x = __float2half(nd(rng));
  std::vector<float> q(static_cast<size_t>(rows * qd));
  for (auto& x : q) x = 2.0f * nd(rng);
  std::vector<int32_t> pos(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(positions + r);
  std::vector<std::vector<double>> ref;
  for (int64_t r : {int64_t{0}, rows - 1}) {
    const std::vector<float> qr(q.begin() + r * qd, q.begin() + (r + 1) * qd);
    ref.push_back(reference(qr, K, V, s, pos[r], a.scale));
  }

  DevBuf dK(static_cast<size_t>(n_ctx * kvd) * 2), dV(static_cast<size_t>(n_ctx * kvd) * 2);
  DevBuf dq(q.size() * 4), dout(q.size() * 4), dpos(pos.size() * 4);
  DevBuf dscr(df::cuda::attention_scratch_floats(8, a) * 4 + 16);
  DevBuf dcnt(static_cast<size_t>(df::cuda::attention_counters(8, a)) * 4);
  ck(cudaMemcpy(dK.p, K.data(), K.size() * 2, cudaMemcpyHostToDevice), "upload K");
  ck(cudaMemcpy(dV.p, V.data(), V.size() * 2, cudaMemcpyHostToDevice), "upload V");
  ck(cudaMemcpy(dq.p, q.data(), q.size() * 4, cudaMemcpyHostToDevice), "upload q");
  ck(cudaMemcpy(dpos.p, pos.data(), pos.size() * 4, cudaMemcpyHostToDevice), "upload pos");
  ck(cudaMemset(dcnt.p, 0, static_cast<size_t>(df::cuda::attention_counters(8, a)) * 4), "zero counters");
  json res = json::array();
  std::vector<float> gqa_out;
  for (int kernel : {0, 1, 2}) {  // v1, gqa, gqa256 (wide)
    const bool v1 = kernel == 0, wide = kernel == 2;
    const char* kname = kernel == 0 ? "v1" : kernel == 1 ? "gqa" : "gqa256";
    cudaStream_t st;
    ck(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
    auto launch = [&](int64_t r0, int64_t n, float* out) {
      df::cuda::launch_attention(static_cast<const float*>(dq.p) + r0 * qd, qd, n, static_cast<const __half*>(dK.p),
                                 static_cast<const __half*>(dV.p), kvd, static_cast<const int32_t*>(dpos.p) + r0, 0, a,
                                 static_cast<float*>(dscr.p), out, qd, st, static_cast<int32_t*>(dcnt.p), true, v1,
                                 wide);
    };
    // Validation.
    std::vector<float> all(q.size()), alone(q.size());
    launch(0, rows, static_cast<float*>(dout.p));
    ck(cudaMemcpyAsync(all.data(), dout.p, all.size() * 4, cudaMemcpyDeviceToHost, st), "download");
    for (int64_t r = 0; r < rows; ++r) {
      launch(r, 1, static_cast<float*>(dout.p) + r * qd);
    }
    ck(cudaMemcpyAsync(alone.data(), dout.p, alone.size() * 4, cudaMemcpyDeviceToHost, st), "download");
    ck(cudaStreamSynchronize(st), "sync");
    const bool rows_bits = std::memcmp(all.data(), alone.data(), all.size() * 4) == 0;
    if (kernel == 1) gqa_out = all;
    const bool wide_bits = kernel != 2 || std::memcmp(all.data(), gqa_out.data(), all.size() * 4) == 0;
    const double err = std::max(nmse(ref[0], all.data()), nmse(ref[1], all.data() + (rows - 1) * qd));
    // Timing: a graph of 64 launches.
    constexpr int kPerGraph = 64;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    ck(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < kPerGraph; ++i) launch(0, rows, static_cast<float*>(dout.p));
    ck(cudaStreamEndCapture(st, &g), "end capture");
    ck(cudaGraphInstantiate(&ge, g, 0), "instantiate");
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event");
    ck(cudaEventCreate(&e1), "event");
    ck(cudaGraphLaunch(ge, st), "warm-up");
    std::vector<double> us;
    for (int i = 0; i < reps; ++i) {
      ck(cudaEventRecord(e0, st), "record");
      ck(cudaGraphLaunch(ge, st), "replay");
      ck(cudaEventRecord(e1, st), "record");
      ck(cudaEventSynchronize(e1), "sync");
      float ms = 0;
      ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
      us.push_back(1000.0 * ms / kPerGraph);
    }
    std::sort(us.begin(), us.end());
    const double med = us[us.size() / 2];
    const double bytes = static_cast<double>(filled) * static_cast<double>(kvd) * 2 * 2;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    cudaStreamDestroy(st);
    const df::cuda::AttnSplit sp = df::cuda::attention_split(rows, a);
    std::printf("%-4s %-6s pos %5lld rows %lld: %8.2f us  %7.1f GB/s  nmse %.2e  rows-bits %s%s  (%d slices of %lld)\n",
                s.name, kname, static_cast<long long>(positions), static_cast<long long>(rows), med,
                bytes / (med * 1e-6) / 1e9, err, rows_bits ? "same" : "DIFFER", wide_bits ? "" : "  NOT THE GQA BITS",
                sp.n_splits, static_cast<long long>(sp.split_len));
    res.push_back({{"shape", s.name}, {"kernel", kname}, {"same_bits_as_gqa", wide_bits}, {"positions", positions}, {"rows", rows},
                   {"n_ctx", n_ctx}, {"n_splits", sp.n_splits}, {"split_len", sp.split_len}, {"us_per_call", med},
                   {"us_min", us.front()}, {"gb_per_s", bytes / (med * 1e-6) / 1e9}, {"nmse_vs_f64", err},
                   {"rows_alone_bits", rows_bits}});
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"decode attention workbench (v1 vs the GQA kernel)"};
  std::string out_path;
  int reps = 20;
  app.add_option("--out", out_path, "JSON output file");
  app.add_option("--reps", reps, "graph replays per case (median)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const Shape shapes[] = {{"4B", 32, 8, 128}, {"27B", 24, 4, 256}};
    json res = json::array();
    int fails = 0;
    for (const Shape& s : shapes)
      for (int64_t p : {64, 600, 2048, 8192})
        for (int64_t rows : {1, 8})
          for (json& j : run_case(s, p, rows, reps)) {
            if (!(j["nmse_vs_f64"].get<double>() < 1e-6) || !j["rows_alone_bits"].get<bool>() ||
                !j["same_bits_as_gqa"].get<bool>())
              ++fails;
            res.push_back(std::move(j));
          }
    json doc = {{"bench", "bench_attn_cuda"}, {"cases", res}, {"validation_failures", fails}};
    if (!out_path.empty()) std::ofstream(out_path) << doc.dump(1) << "\n";
    std::printf("validation failures: %d\n", fails);
    return fails ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
