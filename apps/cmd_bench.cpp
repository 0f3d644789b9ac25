// `diskformer bench`: prefill and decode speed (llama-bench's pp/tg), with the weight bytes
// read per decoded token and the bandwidth that implies; on a GPU also the device's read
// bandwidth (measured here with a read kernel) and the share of it decode reaches.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench_mmap.h"
#include "bench_profile.h"
#include "bench_spec.h"
#include "common/error.h"
#include "common.h"
#include "diskformer/generator.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#ifdef DF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/expert_cache.h"
#endif

namespace df::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Summary {
  double mean = 0, stddev = 0;
};
Summary summarize(const std::vector<double>& v) {
  Summary s;
  if (v.empty()) return s;
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  for (double x : v) s.stddev += (x - s.mean) * (x - s.mean);
  s.stddev = v.size() > 1 ? std::sqrt(s.stddev / static_cast<double>(v.size() - 1)) : 0.0;
  return s;
}

// The device's read bandwidth in bytes/s, measured with a pure read kernel over 4 GiB (the
// ceiling of a decode step); 0 on the CPU.
double device_read_bandwidth(Backend& b) {
#ifdef DF_HAVE_CUDA
  if (auto* c = dynamic_cast<cuda::CudaBackend*>(&b)) return c->measure_read_bandwidth(size_t{4} << 30, 10);
#endif
  return 0.0;
}

// Counters of the CUDA backend's expert cache (zeros elsewhere or with resident experts).
struct CacheCounts {
  bool streamed = false;
  uint64_t hits = 0, misses = 0, bytes = 0, in_place = 0, replacements = 0, capacity = 0, host_bytes = 0;
  int64_t slots = 0;
  // The file tier (--expert-source file).
  bool from_file = false, direct = false;
  uint64_t expert_bytes = 0, loads = 0, disk = 0, syncs = 0;
  double read_s = 0, stall_s = 0;
  void add_delta(const CacheCounts& a, const CacheCounts& b) {  // += b - a
    hits += b.hits - a.hits, misses += b.misses - a.misses, bytes += b.bytes - a.bytes;
    in_place += b.in_place - a.in_place, replacements += b.replacements - a.replacements;
    loads += b.loads - a.loads, disk += b.disk - a.disk, syncs += b.syncs - a.syncs;
    read_s += b.read_s - a.read_s, stall_s += b.stall_s - a.stall_s;
  }
};
CacheCounts cache_counts(Backend& b) {
  CacheCounts c;
#ifdef DF_HAVE_CUDA
  if (auto* g = dynamic_cast<cuda::CudaBackend*>(&b)) {
    const cuda::ExpertCacheStats s = g->expert_cache_stats();
    c.streamed = g->experts_streamed();
    c.hits = s.hits, c.misses = s.misses, c.bytes = s.bytes_uploaded, c.capacity = s.capacity_bytes;
    c.in_place = s.bytes_in_place, c.replacements = s.replacements;
    c.host_bytes = s.host_bytes, c.slots = s.slots;
    c.from_file = s.from_file, c.direct = s.direct, c.expert_bytes = s.expert_bytes, c.loads = s.loads;
    c.disk = s.bytes_from_disk, c.syncs = s.syncs, c.read_s = s.read_seconds, c.stall_s = s.stall_seconds;
  }
#endif
  return c;
}

}  // namespace

void register_bench(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    std::vector<int64_t> n_prompt{512};  // prompt lengths, each measured (-p 512,8192)
    int64_t n_gen = 128;
    int reps = 3;
    std::string output = "text";
    SpecFlags spec;
    double draft_accept = -1.0;
    std::string spec_prompt;
    bool profile = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("bench", "measure prefill and decode speed");
  add_model_flags(*cmd, f->model);
  cmd->add_option("-p,--n-prompt", f->n_prompt, "prompt tokens for the prefill test (a comma-separated list: each)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", f->n_gen, "tokens for the decode test")->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--repetitions", f->reps, "repetitions of each test")->check(CLI::PositiveNumber);
  cmd->add_option("--output", f->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  f->spec.mode = "none";
  add_spec_flags(*cmd, f->spec);
  cmd->add_option("--draft-accept", f->draft_accept,
                  "with --spec mtp: replace each proposal by the known greedy continuation with this probability "
                  "(benchmark of random-weight models)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--spec-prompt", f->spec_prompt,
                  "with --spec mtp: the spec test's prompt is the first 64 tokens of this text file (default: random ids)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--profile", f->profile,
                "--device cuda: also decode -n tokens op by op with each backend op timed (`profile` in the JSON, a "
                "table on stderr)");
  cmd->callback([f] {
    ModelFlags mf = f->model;
    if (f->n_prompt.empty()) f->n_prompt.push_back(0);
    const int64_t max_prompt = *std::max_element(f->n_prompt.begin(), f->n_prompt.end());
    mf.ctx = std::max<int64_t>(mf.ctx, max_prompt + f->n_gen + 1);
    auto engine = load_engine(mf);
    if (f->profile) require_profile_backend(*engine);
    const ModelInfo& info = engine->info();
    const int64_t vocab = std::min<int64_t>(info.n_vocab, engine->tokenizer().n_vocab());
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
    std::vector<Token> prompt(static_cast<size_t>(max_prompt));
    for (auto& t : prompt) t = pick(rng);
    Session session(*engine);
    Backend& backend = engine->backend();
    bool lookahead = false;  // GreedySteps::lookahead of the decode test
    // pp[i]: prefill tok/s of prompt length i; ttft[i]: seconds until the last position's
    // logits are on the host (the first generated token can be picked).
    std::vector<std::vector<double>> pp(f->n_prompt.size()), ttft(f->n_prompt.size());
    std::vector<double> tg, pp_cpu, tg_cpu;  // tokens per process CPU second
    CacheCounts tg_cache;  // decode steps of the measured repetitions
    MmapCounts tg_mmap, pp_mmap;  // CPU experts on mapped pages: decode steps, prefills (measured repetitions)
    double pp_tokens = 0;
    for (int r = 0; r < f->reps + 1; ++r) {  // the first repetition warms up and is dropped
      for (size_t i = 0; i < f->n_prompt.size(); ++i) {
        const int64_t np = f->n_prompt[i];
        if (np == 0) continue;
        const std::vector<Token> pr(prompt.begin(), prompt.begin() + np);
        session.prefill({pick(rng)});  // different first token: nothing is reused
        const MmapCounts m0 = mmap_counts(backend);
        const double c0 = process_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        session.prefill(pr);  // returns the last position's logits on the host
        const double sec = seconds_since(t0), cpu = process_cpu_seconds() - c0;
        if (r > 0) pp_mmap.add_delta(m0, mmap_counts(backend)), pp_tokens += static_cast<double>(np);
        if (r > 0) pp[i].push_back(static_cast<double>(np) / sec), ttft[i].push_back(sec);
        if (r > 0 && i == 0) pp_cpu.push_back(static_cast<double>(np) / cpu);
      }
      if (f->n_gen > 0) {
        session.prefill({pick(rng)});
        // Each step as a greedy generator runs it (GreedySteps): forward, argmax on the device,
        // the one id back to the host (the only sync per token), fed as the next input; with
        // --decode-lookahead the next step is queued before the host reads the id.
        GreedySteps steps(session);
        lookahead = steps.lookahead();
        Token t = pick(rng);
        const CacheCounts c0 = cache_counts(backend);
        const MmapCounts m0 = mmap_counts(backend);
        const double cpu0 = process_cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < f->n_gen; ++i) t = steps.next(t, i + 1 < f->n_gen);
        if (r > 0) {
          tg.push_back(static_cast<double>(f->n_gen) / seconds_since(t0));
          tg_cpu.push_back(static_cast<double>(f->n_gen) / (process_cpu_seconds() - cpu0));
          tg_cache.add_delta(c0, cache_counts(backend));
          tg_mmap.add_delta(m0, mmap_counts(backend));
        }
      }
    }
    const Summary p = summarize(pp[0]), g = summarize(tg);
    const double gbs = g.mean * static_cast<double>(info.bytes_per_token) / 1e9;
    nlohmann::json out = {{"model", resolve_model_path(f->model.model, f->model.store)},
                          {"arch", info.arch},
                          {"backend", engine->backend_name()},
                          {"n_params", info.n_params},
                          {"weight_bytes", info.weight_bytes},
                          {"bytes_per_token", info.bytes_per_token},
                          {"n_prompt", f->n_prompt[0]},
                          {"n_gen", f->n_gen},
                          {"repetitions", f->reps},
                          {"prefill_tokens_per_second", p.mean},
                          {"prefill_stddev", p.stddev},
                          {"decode_tokens_per_second", g.mean},
                          {"decode_stddev", g.stddev},
                          {"decode_ms_per_token", g.mean > 0 ? 1000.0 / g.mean : 0.0},
                          {"decode_weight_gb_per_second", gbs},
                          {"prefill_cpu_tokens_per_second", summarize(pp_cpu).mean},
                          {"decode_cpu_tokens_per_second", summarize(tg_cpu).mean},
                          {"decode_lookahead", lookahead}};
    nlohmann::json per = nlohmann::json::array();
    for (size_t i = 0; i < f->n_prompt.size(); ++i) {
      const Summary a = summarize(pp[i]), t = summarize(ttft[i]);
      per.push_back({{"n_prompt", f->n_prompt[i]},
                     {"tokens_per_second", a.mean},
                     {"stddev", a.stddev},
                     {"time_to_first_token_ms", 1000.0 * t.mean}});
    }
    out["prefill"] = per;
    const CacheCounts cc = cache_counts(backend);
    if (cc.streamed) {
      const double lookups = static_cast<double>(tg_cache.hits + tg_cache.misses);
      const double tokens = static_cast<double>(f->n_gen) * f->reps;
      out["expert_cache"] = {{"capacity_bytes", cc.capacity},
                             {"slots", cc.slots},
                             {"host_pinned_bytes", cc.host_bytes},
                             {"all_hits", cc.hits},
                             {"all_misses", cc.misses},
                             {"all_bytes_uploaded", cc.bytes},
                             {"decode_hits", tg_cache.hits},
                             {"decode_misses", tg_cache.misses},
                             {"decode_hit_rate", lookups > 0 ? static_cast<double>(tg_cache.hits) / lookups : 0.0},
                             {"decode_bytes_uploaded_per_token", tokens > 0 ? static_cast<double>(tg_cache.bytes) / tokens : 0.0},
                             {"decode_upload_gb_per_second",
                              g.mean > 0 && tokens > 0 ? static_cast<double>(tg_cache.bytes) / tokens * g.mean / 1e9 : 0.0},
                             {"decode_replacements", tg_cache.replacements},
                             // misses read from pinned host memory in place by the kernels
                             {"decode_bytes_from_host_per_token", tokens > 0 ? static_cast<double>(tg_cache.in_place) / tokens : 0.0},
                             {"decode_host_read_gb_per_second",
                              g.mean > 0 && tokens > 0 ? static_cast<double>(tg_cache.in_place) / tokens * g.mean / 1e9 : 0.0},
                             {"all_bytes_from_host", cc.in_place},
                             {"all_replacements", cc.replacements},
                             {"source", cc.from_file ? "file" : "host"}};
      if (cc.from_file) {
        // The file tier: misses read from the GGUF (ggml bytes), the reads' achieved GB/s
        // (bytes over the wall time of the reading waves), the host's time stalled in the
        // loads (reads, repacking, uploads) per token and as a share of the decode time.
        const double sec = g.mean > 0 && tokens > 0 ? tokens / g.mean : 0.0;
        out["expert_cache"].update({{"packed_expert_bytes", cc.expert_bytes},
                                    {"direct_io", cc.direct},
                                    {"all_loads", cc.loads},
                                    {"all_bytes_from_disk", cc.disk},
                                    {"all_read_seconds", cc.read_s},
                                    {"all_stall_seconds", cc.stall_s},
                                    {"decode_loads", tg_cache.loads},
                                    {"decode_bytes_from_disk_per_token", tokens > 0 ? static_cast<double>(tg_cache.disk) / tokens : 0.0},
                                    {"decode_disk_gb_per_second",
                                     tg_cache.read_s > 0 ? static_cast<double>(tg_cache.disk) / tg_cache.read_s / 1e9 : 0.0},
                                    {"decode_stall_ms_per_token", tokens > 0 ? 1000.0 * tg_cache.stall_s / tokens : 0.0},
                                    {"decode_stall_share", sec > 0 ? tg_cache.stall_s / sec : 0.0},
                                    {"decode_loading_syncs_per_token", tokens > 0 ? static_cast<double>(tg_cache.syncs) / tokens : 0.0}});
      }
    }
    const MmapCounts mc = mmap_counts(backend);
    if (!cc.streamed && mc.on)
      out["expert_cache"] = mmap_report(mc, tg_mmap, pp_mmap, static_cast<double>(f->n_gen) * f->reps, g.mean, pp_tokens);
    const double read_bw = device_read_bandwidth(backend);
    if (read_bw > 0) {
      out["device_read_gb_per_second"] = read_bw / 1e9;
      out["decode_share_of_read_bandwidth"] = gbs * 1e9 / read_bw;
    }
    if (f->profile) {
      const std::vector<Token> pr(prompt.begin(), prompt.begin() + f->n_prompt[0]);
      out["profile"] = bench_profile(*engine, pr, std::max<int64_t>(f->n_gen, 1), g.mean > 0 ? 1000.0 / g.mean : 0.0);
      print_profile(out["profile"]);
    }
    const bool spec = f->spec.mode == "mtp" || f->spec.mode == "draft-mtp";
    if (spec && f->n_gen > 0) {
      std::vector<Token> sp(prompt.begin(), prompt.begin() + std::min<int64_t>(f->n_prompt[0], 64));
      if (!f->spec_prompt.empty()) {
        std::ifstream in(f->spec_prompt, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        sp = engine->tokenizer().encode(text.str().substr(0, 4096), false);
        sp.resize(std::min<size_t>(sp.size(), 64));
        if (sp.empty()) throw Error("--spec-prompt: '" + f->spec_prompt + "' gives no tokens");
      }
      if (sp.empty()) sp.push_back(pick(rng));
      out["spec"] = bench_spec(*engine, sp, f->n_gen, f->reps, f->spec, f->draft_accept);
    }
    if (out.contains("expert_cache") && cc.from_file)  // the file tier's report, on stderr in both outputs
      std::fprintf(stderr,
                   "experts from the file (%s): %.2f MiB read per token at %.3f GB/s, %.1f ms stalled per token "
                   "(%.1f %% of decode), hit rate %.3f\n",
                   cc.direct ? "O_DIRECT" : "buffered",
                   out["expert_cache"]["decode_bytes_from_disk_per_token"].get<double>() / (1 << 20),
                   out["expert_cache"]["decode_disk_gb_per_second"].get<double>(),
                   out["expert_cache"]["decode_stall_ms_per_token"].get<double>(),
                   100.0 * out["expert_cache"]["decode_stall_share"].get<double>(),
                   out["expert_cache"]["decode_hit_rate"].get<double>());
    if (out.contains("expert_cache") && !cc.streamed)  // CPU experts on the mapped file, as the file tier's report
      std::fprintf(stderr,
                   "experts from the mapped file (mmap): %.2f MiB read from disk per token at %.3f GB/s, %.1f ms "
                   "stalled per token (%.1f %% of decode), hit rate %.3f; the checks %.3f ms per token\n",
                   out["expert_cache"]["decode_bytes_from_disk_per_token"].get<double>() / (1 << 20),
                   out["expert_cache"]["decode_disk_gb_per_second"].get<double>(),
                   out["expert_cache"]["decode_stall_ms_per_token"].get<double>(),
                   100.0 * out["expert_cache"]["decode_stall_share"].get<double>(),
                   out["expert_cache"]["decode_hit_rate"].get<double>(),
                   out["expert_cache"]["decode_check_ms_per_token"].get<double>());
    if (f->output == "json") {
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      std::printf("%s on %s\n", info.arch.c_str(), engine->backend_name().c_str());
      for (const auto& e : per)
        std::printf("pp%lld: %.2f ± %.2f tok/s, time to first token %.1f ms\n",
                    static_cast<long long>(e["n_prompt"].get<int64_t>()), e["tokens_per_second"].get<double>(),
                    e["stddev"].get<double>(), e["time_to_first_token_ms"].get<double>());
      std::printf("tg%lld: %.2f ± %.2f tok/s (%.2f ms/token, %.2f MiB/token, %.2f GB/s)\n",
                  static_cast<long long>(f->n_gen), g.mean, g.stddev, g.mean > 0 ? 1000.0 / g.mean : 0.0,
                  static_cast<double>(info.bytes_per_token) / (1 << 20), gbs);
      if (read_bw > 0)
        std::printf("device read bandwidth %.1f GB/s (read kernel): decode at %.1f %% of it\n", read_bw / 1e9,
                    100.0 * gbs * 1e9 / read_bw);
      if (out.contains("expert_cache") && cc.streamed)
        std::printf("expert cache %.1f MiB (%lld experts): decode hit rate %.3f, %.2f MiB read from host and %.2f MiB "
                    "uploaded per token\n",
                    static_cast<double>(cc.capacity) / (1 << 20), static_cast<long long>(cc.slots),
                    out["expert_cache"]["decode_hit_rate"].get<double>(),
                    out["expert_cache"]["decode_bytes_from_host_per_token"].get<double>() / (1 << 20),
                    out["expert_cache"]["decode_bytes_uploaded_per_token"].get<double>() / (1 << 20));
      if (out.contains("spec"))
        std::printf("spec mtp (draft-max %d%s): %.2f tok/s vs plain %.2f tok/s (x%.2f), %lld of %lld drafts accepted\n",
                    f->spec.draft_max, f->spec.draft_fixed ? ", fixed" : "", out["spec"]["spec_tokens_per_second"].get<double>(),
                    out["spec"]["plain_tokens_per_second"].get<double>(), out["spec"]["speedup"].get<double>(),
                    static_cast<long long>(out["spec"]["accepted"].get<int64_t>()),
                    static_cast<long long>(out["spec"]["drafted"].get<int64_t>()));
    }
  });
}

}  // namespace df::cli
