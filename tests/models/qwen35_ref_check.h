// The comparison of a Qwen3.5 hybrid model (qwen35, qwen35moe) with llama.cpp shared by
// test_qwen35_ref.cpp and test_qwen35moe_ref.cpp: logits of every position of 5 prompts
// (normalised error) and 32 greedy tokens from each (free-running, then teacher-forced), each
// through prefill chunk sizes 1, 7 and 64. Both sides keep the KV cache in F32 and llama.cpp
// runs without flash attention.
#pragma once
#include <string>

namespace df::reftest {

struct HybridCheck {
  std::string name;   // file names in the work dir, messages
  std::string arch;   // general.architecture the model must have
  double max_nerr;    // logits budget
  float tie_margin;   // greedy divergence excused below this llama.cpp top-2 logit margin
  bool cpu_repack = true;  // the engine's load-time repacked weights (CpuBackendOptions::repack)
};

// Runs llama.cpp (llama_ref logits / generate) and the engine on `model` and checks them
// (gtest assertions).
void check_hybrid_against_llama(const std::string& model, const HybridCheck& c);

}  // namespace df::reftest
