// Workbench of the Gated DeltaNet prefill's delta rule (helper gdnpre, issue 14): the reference
// is today's prefill kernel, the token-by-token one (ops/delta_rule.cuh, f32; within 1e-9 of the
// CPU in test_cuda_ops.cpp); variants: the f32 chunked kernel ("v1", ops/delta_rule_chunked.cuh)
// and the tensor-core chunked kernel (ops/delta_rule_chunked_tc.cuh) with tf32 or 3xTF32
// operands and every state slice (16, 32, 64 value rows a block; "auto" = the backend's
// choice). Per case: us per call (median of --reps, CUDA events), NMSE and max |diff| of the
// outputs and of the state left against the reference, from the same inputs and state; and
// each of the tensor-core kernel's three launches timed alone.
// Shapes: the 35B-A3B's DeltaNet (16 key / 32 value heads of 128) and the 27B's (16 / 48).
//
//   bench_gdn_chunked --out gdn.json [--ns 512,4096] [--reps 20]
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda/ops/delta_rule.cuh"
#include "backend/cuda/ops/delta_rule_chunked.cuh"
#include "backend/cuda/ops/delta_rule_chunked_tc.cuh"
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
  float* f() const { return static_cast<float*>(p); }
};

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  float uniform(float lo, float hi) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return lo + (hi - lo) * static_cast<float>((s * 0x2545F4914F6CDD1Dull) >> 40) * 0x1p-24f;
  }
};

void upload(const DevBuf& b, const std::vector<float>& v) {
  ck(cudaMemcpy(b.p, v.data(), v.size() * 4, cudaMemcpyHostToDevice), "upload");
}
std::vector<float> download(const DevBuf& b, size_t n) {
  std::vector<float> v(n);
  ck(cudaMemcpy(v.data(), b.p, n * 4, cudaMemcpyDeviceToHost), "download");
  return v;
}

struct Diff {
  double nmse = 0, max_abs = 0;
};
Diff diff(const std::vector<float>& got, const std::vector<float>& ref) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return {INFINITY, INFINITY};
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d, den += static_cast<double>(ref[i]) * ref[i], mx = std::max(mx, std::fabs(d));
  }
  return {den > 0 ? num / den : num, mx};
}

double time_us(const std::function<void()>& f, int reps) {
  cudaEvent_t e0, e1;
  ck(cudaEventCreate(&e0), "event");
  ck(cudaEventCreate(&e1), "event");
  f();
  f();
  ck(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    ck(cudaEventRecord(e0), "record");
    f();
    ck(cudaEventRecord(e1), "record");
    ck(cudaEventSynchronize(e1), "sync");
    float t = 0;
    ck(cudaEventElapsedTime(&t, e0, e1), "elapsed");
    us.push_back(1e3 * t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

json run_case(const char* model, int Hk, int Hv, int d, int64_t n, int reps, int sms, bool& pass) {
  Rng rng(41 + static_cast<uint64_t>(n));
  const int64_t kd = static_cast<int64_t>(Hk) * d, vd = static_cast<int64_t>(Hv) * d, C = 2 * kd + vd;
  std::vector<float> qkv(static_cast<size_t>(n * C));
  for (auto& x : qkv) x = rng.uniform(-1, 1);
  for (int64_t t = 0; t < n; ++t)  // q and k heads l2-normalised, as the model feeds them
    for (int h = 0; h < 2 * Hk; ++h) {
      float* x = qkv.data() + t * C + static_cast<int64_t>(h) * d;
      double s = 0;
      for (int i = 0; i < d; ++i) s += static_cast<double>(x[i]) * x[i];
      for (int i = 0; i < d; ++i) x[i] = static_cast<float>(x[i] / std::sqrt(s));
    }
  std::vector<float> g(static_cast<size_t>(n * Hv)), beta(g.size()), st(static_cast<size_t>(vd * d));
  for (auto& x : g) x = rng.uniform(-1.0f, -0.01f);
  for (auto& x : beta) x = rng.uniform(0.05f, 0.95f);
  for (auto& x : st) x = rng.uniform(-0.1f, 0.1f);
  DevBuf dqkv(qkv.size() * 4), dg(g.size() * 4), db(beta.size() * 4), dst(st.size() * 4),
      dout(static_cast<size_t>(n * vd) * 4),
      scratch(df::cuda::delta_rule_chunked_tc_scratch_bytes(n, Hv, d));
  upload(dqkv, qkv), upload(dg, g), upload(db, beta);
  df::cuda::DeltaRuleArgs a;
  a.q = dqkv.f(), a.q_stride = C, a.k = dqkv.f() + kd, a.k_stride = C, a.v = dqkv.f() + 2 * kd, a.v_stride = C;
  a.g = dg.f(), a.g_stride = Hv, a.beta = db.f(), a.beta_stride = Hv;
  a.state = dst.f(), a.out = dout.f(), a.out_stride = vd;
  a.n = n, a.d = d, a.n_k_heads = Hk, a.n_v_heads = Hv, a.scale = 1.0f / std::sqrt(static_cast<float>(d));
  // one run from the initial state: outputs and state
  auto once = [&](const std::function<void()>& f) {
    upload(dst, st);
    ck(cudaMemset(dout.p, 0xff, static_cast<size_t>(n * vd) * 4), "poison");
    f();
    ck(cudaDeviceSynchronize(), "run");
    return std::make_pair(download(dout, static_cast<size_t>(n * vd)), download(dst, st.size()));
  };
  auto token = [&] { df::cuda::launch_gated_delta_rule(a, nullptr); };
  const auto ref = once(token);
  const double t_ref = time_us(token, reps);
  json j = {{"model", model}, {"n_k_heads", Hk}, {"n_v_heads", Hv}, {"d", d}, {"n", n}, {"token_us", t_ref},
            {"auto_slice", df::cuda::delta_rule_chunked_tc_default_slice(d, Hv, sms)}};
  std::printf("%s Hk %d Hv %d d %d n %lld: token kernel (reference) %.1f us\n", model, Hk, Hv, d,
              static_cast<long long>(n), t_ref);
  json vars = json::array();
  auto variant = [&](const std::string& name, const std::function<void()>& f, double budget) {
    const auto got = once(f);
    const Diff eo = diff(got.first, ref.first), es = diff(got.second, ref.second);
    const double us = time_us(f, reps);
    const bool ok = eo.nmse <= budget && es.nmse <= budget;
    pass = pass && ok;
    std::printf("  %-16s %9.1f us  x%6.2f  out nmse %.3g max %.3g  state nmse %.3g max %.3g %s\n", name.c_str(), us,
                t_ref / us, eo.nmse, eo.max_abs, es.nmse, es.max_abs, ok ? "" : "OVER BUDGET");
    vars.push_back({{"variant", name}, {"us", us}, {"speedup_vs_token", t_ref / us}, {"nmse_out", eo.nmse},
                    {"max_abs_out", eo.max_abs}, {"nmse_state", es.nmse}, {"max_abs_state", es.max_abs},
                    {"budget", budget}, {"pass", ok}});
  };
  variant("chunked-v1", [&] { df::cuda::launch_gated_delta_rule_chunked(a, nullptr); }, 1e-8);
  for (bool split : {false, true})
    for (int bv : {0, 16, 32, 64}) {
      const std::string name = std::string(split ? "3xtf32" : "tf32") + (bv ? " bv" + std::to_string(bv) : " auto");
      variant(name, [&] { df::cuda::launch_gated_delta_rule_chunked_tc(a, scratch.p, split, bv, nullptr); },
              split ? 1e-9 : 1e-6);
    }
  json phases = json::object();  // each launch of the tensor-core kernel alone (auto slice)
  for (bool split : {false, true}) {
    const char* names[] = {"prep", "state", "out"};
    json p = json::object();
    std::printf("  %-7s launches alone:", split ? "3xtf32" : "tf32");
    for (int ph = 0; ph < 3; ++ph) {
      const double us = time_us(
          [&] { df::cuda::launch_gated_delta_rule_chunked_tc_phases(a, scratch.p, split, 0, 1 << ph, nullptr); }, reps);
      p[names[ph]] = us;
      std::printf(" %s %.1f us", names[ph], us);
    }
    std::printf("\n");
    phases[split ? "3xtf32" : "tf32"] = p;
  }
  j["phases_us"] = phases;
  j["variants"] = vars;
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Gated DeltaNet prefill workbench");
  std::string out_path = "gdn_chunked.json";
  std::vector<int> ns = {512, 4096};
  int reps = 20;
  app.add_option("--out", out_path, "JSON output");
  app.add_option("--ns", ns, "token counts (comma-separated)")->delimiter(',');
  app.add_option("--reps", reps, "timed calls per variant (median)");
  CLI11_PARSE(app, argc, argv);
  try {
    int dev = 0, sms = 0;
    ck(cudaGetDevice(&dev), "device");
    ck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "sms");
    cudaDeviceProp prop{};
    ck(cudaGetDeviceProperties(&prop, dev), "props");
    json j = {{"device", prop.name}, {"sms", sms}};
    json cases = json::array();
    bool pass = true;
    for (int n : ns) {
      cases.push_back(run_case("qwen35moe 35B-A3B", 16, 32, 128, n, reps, sms, pass));
      cases.push_back(run_case("qwen35 27B", 16, 48, 128, n, reps, sms, pass));
    }
    cases.push_back(run_case("small d64", 2, 4, 64, 1000, reps, sms, pass));
    cases.push_back(run_case("small d32", 1, 2, 32, 100, reps, sms, pass));
    j["cases"] = cases;
    j["pass"] = pass;
    std::ofstream(out_path) << j.dump(1) << "\n";
    std::printf("%s\n", pass ? "all variants within budget" : "SOME VARIANT OVER BUDGET");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
