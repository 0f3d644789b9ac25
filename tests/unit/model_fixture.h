// Random models for unit tests: df_make_model writes them into the build's unit_work folder
// (no llama.cpp involved), plus an engine loader with small, test-friendly options.
#pragma once
#include <string>

#include "diskformer/engine.h"
#include "test_util.h"

namespace df::modeltest {

// The running test's own folder under the unit_work folder (testutil::test_dir).
inline std::string work_dir() { return testutil::test_dir(DF_UNIT_WORK_DIR); }

// Writes a random model with df_make_model into work_dir() (on every call).
inline std::string make_model(const std::string& name, const std::string& args) {
  return testutil::make_model_in(work_dir(), name, args);
}

inline std::string default_model() { return std::string(DF_SOURCE_DIR) + "/models/default.gguf"; }

// Small hybrid and dense random models used by the session and rollback tests.
inline const char* kQwen35Args =
    "--arch qwen35 --layers 4 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 --ssm-state 32 "
    "--ssm-k-heads 1 --ssm-v-heads 2 --untied --type f32 --seed 31";
inline const char* kQwen35MoeArgs =
    "--arch qwen35moe --layers 4 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 --ssm-state 32 "
    "--ssm-k-heads 1 --ssm-v-heads 2 --experts 8 --experts-used 3 --expert-ff 64 --shexp-ff 128 --untied "
    "--type f32 --seed 31";
inline const char* kQwen3Args = "--layers 2 --dim 128 --ff 256 --heads 4 --kv-heads 2 --type f32 --seed 7";

}  // namespace df::modeltest
