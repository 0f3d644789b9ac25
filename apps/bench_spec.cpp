#include "bench_spec.h"

#include <algorithm>
#include <chrono>

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
  std::vector<double> plain_tps, spec_tps;
  std::vector<Token> ref;
  spec::SpecStats last;
  bool identical = true;
  for (int r = 0; r < reps + 1; ++r) {  // the first round warms up and is dropped
    Session ps(engine);
    PlainGenerator pg(ps, g);
    const std::vector<Token> out = pg.run(prompt, {});
    if (r == 0) ref = out;
    if (r > 0) plain_tps.push_back(static_cast<double>(ps.stats().generated_tokens) / ps.stats().decode_seconds);
    so.oracle = ref;
    Session ss(engine, so.draft_max + 1);
    spec::MtpGenerator sg(ss, g, so);
    const std::vector<Token> sout = sg.run(prompt, {});
    identical = identical && sout == ref;
    if (r > 0) spec_tps.push_back(static_cast<double>(ss.stats().generated_tokens) / ss.stats().decode_seconds);
    last = sg.stats();
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
  j["identical_to_plain"] = identical;
  return j;
}

}  // namespace df::cli
