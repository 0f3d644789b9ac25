// Options and statistics of speculative decoding (MTP drafts verified by the trunk).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace df::spec {

enum class SpecMode { NONE, MTP };

// "mtp" | "draft-mtp" -> MTP, "none" -> NONE; throws df::Error otherwise.
SpecMode parse_spec_mode(const std::string& s);

struct SpecOptions {
  SpecMode mode = SpecMode::MTP;
  int draft_max = 3;           // deepest draft (1..7)
  bool draft_fixed = false;    // always draft_max: no adaptation, no plain stretches
  // Benchmarks only: each proposal is replaced by the known continuation `oracle` (the plain
  // greedy output for the same prompt) with this probability; < 0: off. The head still runs at
  // full cost, so the speed at a given acceptance can be measured on random-weight models.
  double draft_accept = -1.0;
  std::vector<Token> oracle;
  uint64_t oracle_seed = 1;
};

struct SpecStats {
  int64_t cycles = 0;            // verify passes with at least one draft
  int64_t plain_steps = 0;       // single-row steps (depth 0)
  int64_t drafted = 0;           // draft tokens proposed
  int64_t accepted = 0;          // of those, accepted
  std::vector<int64_t> drafted_at;   // [draft_max] proposals at draft position i (0-based)
  std::vector<int64_t> accepted_at;  // [draft_max] of those, accepted
  std::vector<int64_t> cycles_at;    // [draft_max + 1] cycles run at depth d (0: plain steps)
  double head_seconds = 0.0;     // time in the draft head (host clock, device synchronised by downloads)
  double forecast_seconds = 0.0;  // time in the routing forecasts from the drafts (Model::forecast_experts)
  // Start-up measurement (medians after warm-up): seconds of a verify of 1..draft_max+1 rows
  // (snapshots, every row's logits and argmax), of one head row, of a head catch-up forward
  // (kCatchUpGuess rows), and the cost table the adaptive depth starts from (cycle of depth
  // 0..draft_max; 0: a plain step); cycle_estimate: the policy's T(d) at the end of the run.
  std::vector<double> cost_verify;
  double cost_head = 0.0;
  double cost_head_catchup = 0.0;
  std::vector<double> cost_table;
  std::vector<double> cycle_estimate;
  bool cost_table_reused = false;    // the engine's kept table (no measurement by this generator)
  double cost_measure_seconds = 0.0;  // wall seconds this generator spent measuring it (0 if reused)
};

}  // namespace df::spec
