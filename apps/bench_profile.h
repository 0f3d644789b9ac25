// `diskformer bench --device cuda --profile`: the decode step broken down by backend op. A
// fresh session prefills the bench's prompt, then decodes tokens op by op (no graphs) with
// each op timed by CUDA events, the ops of a step held behind a gate until all are enqueued
// (the device runs them back to back, not at the host's launch rate). Per (op, weight
// shape): calls/token, us/token, share of the step, weight bytes/token and GB/s; beside it
// the graph step at the same positions (a session of its own), the bench's decode step (from
// position 1) and the eager step without events. Positions: after the first -p prompt.
// Then (JSON "prefill") the first -p prompt's prefill as one profiled call, op by op.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "diskformer/engine.h"

namespace df::cli {

// A df::Error unless the engine runs on the CUDA backend (checked before the bench runs).
void require_profile_backend(Engine& engine);
// graph_ms_per_token: the bench's decode ms/token (graphs), reported beside the profile.
nlohmann::json bench_profile(Engine& engine, const std::vector<Token>& prompt, int64_t n_tokens,
                             double graph_ms_per_token);
// The profile as a table on stderr.
void print_profile(const nlohmann::json& p);

}  // namespace df::cli
