// Speculative decoding flags shared by `run`, `chat` and `bench` (llama.cpp's spellings
// --spec-type and --spec-draft-n-max are aliases).
#pragma once
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "spec/mtp_generator.h"

namespace df::cli {

struct SpecFlags {
  std::string mode = "auto";  // auto: mtp for greedy generation when the model has an MTP layer
  int draft_max = 3;
  bool draft_fixed = false;
};

inline void add_spec_flags(CLI::App& app, SpecFlags& s) {
  app.add_option("--spec,--spec-type", s.mode,
                 "speculative decoding: mtp | draft-mtp | none (default: mtp for greedy generation when the "
                 "model has an MTP layer)")
      ->check(CLI::IsMember({"auto", "mtp", "draft-mtp", "none"}));
  app.add_option("--draft-max,--spec-draft-n-max", s.draft_max, "deepest draft (1..7)")->check(CLI::Range(1, 7));
  app.add_flag("--draft-fixed", s.draft_fixed, "always draft --draft-max tokens (no adaptive depth)");
}

// The spec options for a generation with temperature `temp` on `engine`'s model.
inline spec::SpecOptions to_spec_options(const SpecFlags& s, float temp, Engine& engine) {
  spec::SpecOptions o;
  if (s.mode == "auto") {
    o.mode = temp <= 0.0f && engine.model().mtp() ? spec::SpecMode::MTP : spec::SpecMode::NONE;
  } else {
    o.mode = spec::parse_spec_mode(s.mode);
    if (o.mode == spec::SpecMode::MTP && !engine.model().mtp())
      throw Error("--spec mtp: the model has no MTP (nextn) layer");
  }
  o.draft_max = s.draft_max;
  o.draft_fixed = s.draft_fixed;
  return o;
}

// Snapshot slots a session needs for these options (0: plain decoding).
inline int64_t spec_snapshots(const spec::SpecOptions& o) { return o.mode == spec::SpecMode::MTP ? o.draft_max + 1 : 0; }

// The `stats.spec` JSON object and the stderr lines.
inline nlohmann::json spec_json(const spec::SpecStats& st) {
  nlohmann::json rate = nlohmann::json::array();
  for (size_t i = 0; i < st.drafted_at.size(); ++i)
    rate.push_back(st.drafted_at[i] > 0 ? static_cast<double>(st.accepted_at[i]) / static_cast<double>(st.drafted_at[i]) : 0.0);
  return {{"cycles", st.cycles},           {"plain_steps", st.plain_steps},    {"drafted", st.drafted},
          {"accepted", st.accepted},       {"acceptance_at", rate},            {"drafted_at", st.drafted_at},
          {"accepted_at", st.accepted_at}, {"head_seconds", st.head_seconds},
          {"forecast_seconds", st.forecast_seconds}, {"cost_verify_seconds", st.cost_verify},
          {"cost_head_seconds", st.cost_head}, {"cost_head_catchup_seconds", st.cost_head_catchup},
          {"cost_table_seconds", st.cost_table}, {"cycle_estimate_seconds", st.cycle_estimate},
          {"cycles_at", st.cycles_at},     {"cost_table_reused", st.cost_table_reused},
          {"cost_measure_seconds", st.cost_measure_seconds}};
}

inline void print_spec_stats(const spec::SpecStats& st) {
  std::fprintf(stderr, "speculative (mtp): %lld cycles, %lld plain steps, %lld of %lld drafts accepted (%.1f %%); by position:",
               static_cast<long long>(st.cycles), static_cast<long long>(st.plain_steps),
               static_cast<long long>(st.accepted), static_cast<long long>(st.drafted),
               st.drafted > 0 ? 100.0 * static_cast<double>(st.accepted) / static_cast<double>(st.drafted) : 0.0);
  for (size_t i = 0; i < st.drafted_at.size(); ++i)
    if (st.drafted_at[i] > 0)
      std::fprintf(stderr, " %zu: %.1f %%", i + 1, 100.0 * static_cast<double>(st.accepted_at[i]) / static_cast<double>(st.drafted_at[i]));
  std::fprintf(stderr, "\n");
}

}  // namespace df::cli
