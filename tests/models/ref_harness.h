// Helpers for tests against llama.cpp: running the project's tools (df_make_model) and the
// reference CLI (llama_ref), reading their outputs, and comparing logits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace df::reftest {

// Runs a shell command; fails the test (throws) when it exits non-zero. Returns stdout.
std::string run(const std::string& cmd);
std::string work_dir();  // DF_WORK_DIR, created on first use
void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);
std::vector<float> read_floats(const std::string& path);

// mse(a, b) / mse(a, 0)
double normalised_error(const float* ref, const float* got, size_t n);

// Generates a random qwen3 model with df_make_model (cached by name within a test run).
std::string make_model(const std::string& name, const std::string& args);

}  // namespace df::reftest
