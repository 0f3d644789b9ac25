// Random models for unit tests: df_make_model writes them into the build's unit_work folder
// (no llama.cpp involved), plus an engine loader with small, test-friendly options.
#pragma once
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "diskformer/engine.h"

namespace df::modeltest {

inline std::string run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run: " + cmd);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int rc = pclose(p);
  if (rc != 0) throw std::runtime_error("command failed (" + std::to_string(rc) + "): " + cmd + "\n" + out);
  return out;
}

// Writes a random model with df_make_model (once per name and test binary run).
inline std::string make_model(const std::string& name, const std::string& args) {
  const std::string dir = DF_UNIT_WORK_DIR;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".gguf";
  run_command(std::string(DF_MAKE_MODEL) + " -o " + path + " --vocab-text " + DF_SOURCE_DIR +
              "/tools/make_model/vocab_corpus.txt " + args + " 2>&1");
  return path;
}

inline std::string default_model() { return std::string(DF_SOURCE_DIR) + "/models/default.gguf"; }

// Small hybrid and dense random models used by the session and rollback tests.
inline const char* kQwen35Args =
    "--arch qwen35 --layers 4 --dim 128 --ff 256 --heads 2 --kv-heads 1 --head-dim 64 --ssm-state 32 "
    "--ssm-k-heads 1 --ssm-v-heads 2 --untied --type f32 --seed 31";
inline const char* kQwen3Args = "--layers 2 --dim 128 --ff 256 --heads 4 --kv-heads 2 --type f32 --seed 7";

}  // namespace df::modeltest
