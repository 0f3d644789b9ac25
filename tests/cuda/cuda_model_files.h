// Model files for the CUDA tests: random models written by df_make_model (the one next to
// the test binary on the GPU machine, else the build tree's) into a per-process temporary
// folder, and files of the source tree (found relative to the working directory there).
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/error.h"

namespace df::cudatest {

// df_make_model next to this test binary (the GPU machine gets both in one folder), else
// the one of the build tree.
inline std::string make_model_tool() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path near = self.parent_path() / "df_make_model";
    if (std::filesystem::exists(near)) return near.string();
  }
  return DF_MAKE_MODEL;
}

inline std::string source_file(const std::string& rel) {
  const std::filesystem::path built = std::filesystem::path(DF_SOURCE_DIR) / rel;
  if (std::filesystem::exists(built)) return built.string();
  return rel;  // relative to the working directory (the repository root)
}

inline std::string make_model(const std::string& name, const std::string& args) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("df_cuda_tests_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / (name + ".gguf")).string();
  const std::string cmd = make_model_tool() + " -o " + path + " --vocab-text " +
                          source_file("tools/make_model/vocab_corpus.txt") + " " + args + " > /dev/null";
  if (std::system(cmd.c_str()) != 0) throw Error("failed: " + cmd);
  return path;
}

}  // namespace df::cudatest
