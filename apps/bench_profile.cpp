#include "bench_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "backend/backend.h"
#include "common/error.h"
#ifdef DF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace df::cli {

#ifdef DF_HAVE_CUDA
namespace {
// The entries of a profile per step ("per token"): op, shape, calls, us, share, bytes, GB/s.
nlohmann::json profile_ops(const cuda::OpProfile& p, double* step_us, double* ops_us) {
  const double steps = static_cast<double>(std::max<int64_t>(p.steps, 1));
  *step_us = 1000.0 * p.step_ms / steps;
  *ops_us = 0;
  nlohmann::json ops = nlohmann::json::array();
  for (const cuda::OpProfileEntry& e : p.ops) {
    const double us = 1000.0 * e.ms / steps;
    *ops_us += us;
    nlohmann::json j = {{"op", e.op},
                        {"shape", e.shape},
                        {"calls_per_token", static_cast<double>(e.calls) / steps},
                        {"us_per_token", us},
                        {"us_per_call", e.calls ? 1000.0 * e.ms / static_cast<double>(e.calls) : 0.0},
                        {"share_of_step", *step_us > 0 ? us / *step_us : 0.0}};
    if (e.bytes > 0) {
      j["bytes_per_token"] = static_cast<double>(e.bytes) / steps;
      j["gb_per_second"] = e.ms > 0 ? static_cast<double>(e.bytes) / (e.ms * 1e-3) / 1e9 : 0.0;
    }
    ops.push_back(j);
  }
  return ops;
}
}  // namespace
#endif

void require_profile_backend(Engine& engine) {
#ifdef DF_HAVE_CUDA
  if (dynamic_cast<cuda::CudaBackend*>(&engine.backend())) return;
#endif
  throw Error("bench --profile needs the CUDA backend (--device cuda; this engine runs on " + engine.backend_name() +
              ")");
}

nlohmann::json bench_profile(Engine& engine, const std::vector<Token>& prompt, int64_t n_tokens,
                             double graph_ms_per_token) {
#ifdef DF_HAVE_CUDA
  auto* cb = dynamic_cast<cuda::CudaBackend*>(&engine.backend());
  if (!cb) throw Error("bench --profile needs the CUDA backend (--device cuda)");
  // 3 warm-up steps, then n eager or n profiled ones after the prompt: within the context.
  n_tokens = std::min<int64_t>(n_tokens, (engine.options().n_ctx - static_cast<int64_t>(prompt.size()) - 4) / 2);
  if (n_tokens < 1) throw Error("bench --profile needs -n of at least 1 and room for 2n + 4 tokens after the prompt");
  std::vector<std::shared_ptr<Buffer>> owner;
  const Tensor best = alloc_tensor(*cb, GgmlType::I32, 1, 1, owner);
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  double graph_here_ms = 0;  // graph steps at the profile's positions (a session of their own)
  {
    Session gs(engine);
    if (!prompt.empty()) gs.prefill(prompt);
    Token t = prompt.empty() ? 0 : prompt.back();
    auto step = [&] {
      const ForwardOutputs o = gs.append({t});
      cb->argmax(o.logits, best);
      cb->download(best, &t, sizeof t);
    };
    for (int i = 0; i < 3; ++i) step();  // eager, recorded, replayed
    const auto t0 = clock::now();
    for (int64_t i = 0; i < n_tokens; ++i) step();
    graph_here_ms = ms_since(t0) / static_cast<double>(n_tokens);
  }
  cb->set_profiling(true);  // from here every step of this session runs op by op
  nlohmann::json out;
  try {
    Session session(engine);
    if (!prompt.empty()) session.prefill(prompt);
    Token t = prompt.empty() ? 0 : prompt.back();
    auto step = [&] {
      const ForwardOutputs o = session.append({t});
      cb->argmax(o.logits, best);
    };
    for (int i = 0; i < 3; ++i) {  // warm-up (the first steps of a shape allocate)
      step();
      cb->download(best, &t, sizeof t);
    }
    // Eager steps without events: wall time per token.
    const auto t0 = clock::now();
    for (int64_t i = 0; i < n_tokens; ++i) {
      step();
      cb->download(best, &t, sizeof t);
    }
    const double eager_ms = ms_since(t0) / static_cast<double>(n_tokens);
    cb->take_profile();
    for (int64_t i = 0; i < n_tokens; ++i) {
      cb->profile_step_begin();
      step();
      cb->profile_step_end();
      cb->download(best, &t, sizeof t);
    }
    const cuda::OpProfile p = cb->take_profile();
    double step_us = 0, ops_us = 0;
    nlohmann::json ops = profile_ops(p, &step_us, &ops_us);
    out = {{"tokens", p.steps},
           {"context_position", static_cast<int64_t>(prompt.size())},
           {"bench_decode_ms_per_token", graph_ms_per_token},
           {"graph_ms_per_token", graph_here_ms},
           {"eager_ms_per_token", eager_ms},
           {"profiled_step_us", step_us},
           {"ops_us", ops_us},
           {"between_ops_us", step_us - ops_us},
           {"gate_timeouts", p.gate_timeouts},
           {"ops", ops}};
    // The prompt's prefill as one profiled step (after a warm-up prefill in a session of its
    // own: the first call of a shape allocates); "per token" there means per prefill call.
    if (!prompt.empty()) {
      {
        Session warm(engine);
        warm.prefill(prompt);
      }
      cb->take_profile();
      Session ps(engine);
      const auto t1 = clock::now();
      cb->profile_step_begin();
      ps.prefill(prompt);
      cb->profile_step_end();
      const double wall_ms = ms_since(t1);
      const cuda::OpProfile q = cb->take_profile();
      double pstep_us = 0, pops_us = 0;
      nlohmann::json pops = profile_ops(q, &pstep_us, &pops_us);
      out["prefill"] = {{"tokens", static_cast<int64_t>(prompt.size())},
                        {"wall_ms", wall_ms},
                        {"profiled_us", pstep_us},
                        {"ops_us", pops_us},
                        {"between_ops_us", pstep_us - pops_us},
                        {"gate_timeouts", q.gate_timeouts},
                        {"ops", pops}};
    }
  } catch (...) {
    cb->set_profiling(false);
    throw;
  }
  cb->set_profiling(false);
  return out;
#else
  (void)engine, (void)prompt, (void)n_tokens, (void)graph_ms_per_token;
  throw Error("bench --profile needs the CUDA backend (this build has none)");
#endif
}

namespace {
void print_ops(const nlohmann::json& ops) {
  std::fprintf(stderr, "  %-20s %-28s %9s %10s %9s %7s %9s\n", "op", "shape", "calls/tok", "us/tok", "us/call", "share",
               "GB/s");
  for (const auto& e : ops) {
    char gbs[32] = "";
    if (e.contains("gb_per_second")) std::snprintf(gbs, sizeof gbs, "%.0f", e["gb_per_second"].get<double>());
    std::fprintf(stderr, "  %-20s %-28s %9.2f %10.2f %9.2f %6.1f%% %9s\n", e["op"].get<std::string>().c_str(),
                 e["shape"].get<std::string>().c_str(), e["calls_per_token"].get<double>(),
                 e["us_per_token"].get<double>(), e["us_per_call"].get<double>(),
                 100.0 * e["share_of_step"].get<double>(), gbs);
  }
}
}  // namespace

void print_profile(const nlohmann::json& p) {
  std::fprintf(stderr,
               "profile: %lld tokens from position %lld; graph step %.1f us there (bench decode %.1f us), eager %.1f "
               "us, profiled (ops back to back) %.1f us = ops %.1f + between ops %.1f; gate timeouts %lld\n",
               static_cast<long long>(p["tokens"].get<int64_t>()),
               static_cast<long long>(p["context_position"].get<int64_t>()),
               1000.0 * p["graph_ms_per_token"].get<double>(), 1000.0 * p["bench_decode_ms_per_token"].get<double>(),
               1000.0 * p["eager_ms_per_token"].get<double>(),
               p["profiled_step_us"].get<double>(), p["ops_us"].get<double>(), p["between_ops_us"].get<double>(),
               static_cast<long long>(p["gate_timeouts"].get<int64_t>()));
  print_ops(p["ops"]);
  if (p.contains("prefill")) {
    const auto& q = p["prefill"];
    std::fprintf(stderr,
                 "prefill profile: %lld tokens in one call, wall %.2f ms, profiled %.1f us = ops %.1f + between ops "
                 "%.1f; gate timeouts %lld\n",
                 static_cast<long long>(q["tokens"].get<int64_t>()), q["wall_ms"].get<double>(),
                 q["profiled_us"].get<double>(), q["ops_us"].get<double>(), q["between_ops_us"].get<double>(),
                 static_cast<long long>(q["gate_timeouts"].get<int64_t>()));
    print_ops(q["ops"]);
  }
}

}  // namespace df::cli
