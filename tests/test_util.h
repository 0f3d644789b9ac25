// Helpers that both test binaries (tests/unit, tests/models) share: running a command (the
// CLI, df_make_model, llama_ref) and reading / writing whole files.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace df::testutil {

// True in the ASan + UBSan build (scripts/test.sh's second build, gcc's __SANITIZE_ADDRESS__ or
// clang's feature): the slowest repetition-heavy tests take a smaller sample there (that build
// looks for memory errors; the Release build holds the full statistics).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kUnderSanitizer = true;
#else
inline constexpr bool kUnderSanitizer = false;
#endif
#else
inline constexpr bool kUnderSanitizer = false;
#endif

struct CommandResult {
  int rc = -1;      // exit status; 128 + the signal when killed; -1 when it could not start
  std::string out;  // stdout (a command that wants stderr too says 2>&1)
};

// Runs `cmd` with /bin/sh and returns its exit status and stdout; never throws.
inline CommandResult run_status(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Runs `cmd`; a non-zero exit throws std::runtime_error naming the command and its output.
inline std::string run(const std::string& cmd) {
  CommandResult r = run_status(cmd);
  if (r.rc != 0) throw std::runtime_error("command failed (" + std::to_string(r.rc) + "): " + cmd + "\n" + r.out);
  return std::move(r.out);
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// The running test's own folder under `base` (created): base/Suite.Name, with the '/' of
// parameterised names as '_'. ctest runs each test as its own process, and with `ctest -j` two
// tests sharing a file name is a bus error (one regenerates the file that the other has
// mapped) or a wrong answer; so every file a test writes goes here. Outside a test body
// (SetUpTestSuite) it is the suite's folder with the process id.
inline std::string test_dir(const std::string& base) {
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  std::string name;
  if (const ::testing::TestInfo* t = u.current_test_info()) {
    name = std::string(t->test_suite_name()) + "." + t->name();
  } else if (const ::testing::TestSuite* s = u.current_test_suite()) {
    name = std::string(s->name()) + ".pid" + std::to_string(::getpid());
  } else {
    name = "pid" + std::to_string(::getpid());
  }
  for (char& c : name)
    if (c == '/') c = '_';
  const std::string dir = base + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes a random model with df_make_model (DF_MAKE_MODEL) as dir/name.gguf; returns its path.
inline std::string make_model_in(const std::string& dir, const std::string& name, const std::string& args) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".gguf";
  run(std::string(DF_MAKE_MODEL) + " -o " + path + " --vocab-text " + DF_SOURCE_DIR +
      "/tools/make_model/vocab_corpus.txt " + args + " 2>&1");
  return path;
}

}  // namespace df::testutil
