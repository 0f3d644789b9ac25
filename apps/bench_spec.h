// `diskformer bench --spec mtp`: plain greedy generation beside MTP speculative generation of
// the same prompt, alternating, with the speed-up and the acceptance. --draft-accept P replaces
// each proposal by the known greedy continuation with probability P (the head still runs), to
// measure the speed at a realistic acceptance on random-weight files.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "diskformer/engine.h"
#include "spec_flags.h"

namespace df::cli {

nlohmann::json bench_spec(Engine& engine, const std::vector<Token>& prompt, int64_t n_gen, int reps,
                          const SpecFlags& flags, double draft_accept);

}  // namespace df::cli
