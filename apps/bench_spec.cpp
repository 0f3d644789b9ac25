#include "bench_spec.h"

#include <algorithm>
#include <chrono>

#include "bench_mmap.h"
#include "common.h"
#include "common/error.h"
#include "diskformer/generator.h"

namespace df::cli {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

nlohmann::json bench_spec(Engine& engine, const std::vector<Token>& prompt, int64_t n_gen, int reps,
                          const SpecFlags& flags, double draft_accept) {
  if (!engine.model().mtp()) throw Error("bench --spec mtp: the model has no MTP (nextn) layer");
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_new_tokens = n_gen;
  g.stop_at_eog = false;  // the same number of tokens every run
  spec::SpecOptions so = to_spec_options(flags, 0.0f, engine);
  so.mode = spec::SpecMode::MTP;
  so.draft_accept = draft_accept;
  std::vector<double> plain_tps, spec_tps, plain_cpu, spec_cpu;
  std::vector<Token> ref;
  spec::SpecStats last;
  double measured = 0.0;  // the engine's one cost-table measurement (the first generator's)
  bool identical = true;
  // CPU backend: the decode's CPU seconds, a generation of n_gen tokens minus one of 1 token
  // (the prompt, the head's pass over it, the first token).
  const bool cpu = engine.backend().name().rfind("cpu", 0) == 0;
  GenerateOptions g1 = g;
  g1.max_new_tokens = 1;
  auto plain_cpu_of = [&](const GenerateOptions& o) {
    Session s(engine);
    PlainGenerator pg(s, o);
    const double c0 = process_cpu_seconds();
    pg.run(prompt, {});
    return process_cpu_seconds() - c0;
  };
  auto spec_cpu_of = [&](const GenerateOptions& o) {
    Session s(engine, so.draft_max + 1);
    spec::MtpGenerator sg(s, o, so);
    const double c0 = process_cpu_seconds();
    sg.run(prompt, {});
    return process_cpu_seconds() - c0;
  };
  // CPU backend, experts on the file's mapped pages: the expert stats of the timed runs (the
  // prompt's prefill included: a generation's counters), plain and speculative apart
  MmapCounts mm_plain, mm_spec;
  double tok_plain = 0, sec_plain = 0, tok_spec = 0, sec_spec = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up and is dropped
    Session ps(engine);
    PlainGenerator pg(ps, g);
    const MmapCounts m0 = mmap_counts(engine.backend());
    const double c0 = process_cpu_seconds();
    const std::vector<Token> out = pg.run(prompt, {});
    const double c1 = process_cpu_seconds();
    if (r == 0) ref = out;
    if (r > 0) {
      mm_plain.add_delta(m0, mmap_counts(engine.backend()));
      tok_plain += static_cast<double>(ps.stats().generated_tokens), sec_plain += ps.stats().decode_seconds;
    }
    if (r > 0) plain_tps.push_back(static_cast<double>(ps.stats().generated_tokens) / ps.stats().decode_seconds);
    if (r > 0 && cpu) plain_cpu.push_back(c1 - c0 - plain_cpu_of(g1));
    so.oracle = ref;
    Session ss(engine, so.draft_max + 1);
    spec::MtpGenerator sg(ss, g, so);
    const MmapCounts m2 = mmap_counts(engine.backend());
    const double c2 = process_cpu_seconds();
    const std::vector<Token> sout = sg.run(prompt, {});
    const double c3 = process_cpu_seconds();
    if (r > 0) {
      mm_spec.add_delta(m2, mmap_counts(engine.backend()));
      tok_spec += static_cast<double>(ss.stats().generated_tokens), sec_spec += ss.stats().decode_seconds;
    }
    if (r > 0 && cpu) spec_cpu.push_back(c3 - c2 - spec_cpu_of(g1));
    identical = identical && sout == ref;
    if (r > 0) spec_tps.push_back(static_cast<double>(ss.stats().generated_tokens) / ss.stats().decode_seconds);
    last = sg.stats();
    if (r == 0) measured = sg.stats().cost_measure_seconds;
  }
  const double p = median(plain_tps), s = median(spec_tps);
  nlohmann::json j = spec_json(last);
  j["plain_tokens_per_second"] = p;
  j["spec_tokens_per_second"] = s;
  j["speedup"] = p > 0 ? s / p : 0.0;
  j["plain_runs"] = plain_tps;
  j["spec_runs"] = spec_tps;
  j["draft_max"] = so.draft_max;
  j["draft_fixed"] = so.draft_fixed;
  j["draft_accept"] = draft_accept;
  j["draft_vocab"] = engine.model().mtp() ? engine.model().mtp()->draft_vocab() : 0;  // the head's logits' ids
  j["draft_context"] = engine.model().mtp() ? engine.model().mtp()->draft_slots() : 0;  // ... and context slots
  j["identical_to_plain"] = identical;
  if (mm_spec.on) {  // per generated token of the timed runs (their prefills' lookups included)
    j["expert_cache_plain"] = mmap_decode_report(mm_plain, tok_plain, sec_plain > 0 ? tok_plain / sec_plain : 0.0);
    j["expert_cache_spec"] = mmap_decode_report(mm_spec, tok_spec, sec_spec > 0 ? tok_spec / sec_spec : 0.0);
  }
  // Start-up: the cost table is measured once per engine, by the warm-up round's generator;
  // the timed rounds reuse it. Neither tok/s figure includes it (nor the prefill).
  j["startup_cost_table_seconds"] = measured;
  j["startup_in_tokens_per_second"] = false;
  if (cpu) {  // the decode's process CPU seconds: what a loaded machine's lost time slices do not move
    j["plain_decode_cpu_seconds"] = plain_cpu;
    j["spec_decode_cpu_seconds"] = spec_cpu;
    const double pc = median(plain_cpu), sc = median(spec_cpu);
    j["cpu_time_speedup"] = sc > 0 ? pc / sc : 0.0;
  }
  return j;
}

}  // namespace df::cli
