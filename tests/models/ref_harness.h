// Helpers for tests against llama.cpp: running the project's tools (df_make_model) and the
// reference CLI (llama_ref), reading their outputs, and comparing logits.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "test_util.h"

namespace df::reftest {

// run: a shell command; throws when it exits non-zero. Returns stdout.
using testutil::read_file;
using testutil::run;
using testutil::write_file;
std::string work_dir();  // the running test's own folder under DF_WORK_DIR (testutil::test_dir)
std::vector<float> read_floats(const std::string& path);

// mse(a, b) / mse(a, 0)
double normalised_error(const float* ref, const float* got, size_t n);

// Writes a random model with df_make_model into work_dir() (on every call).
std::string make_model(const std::string& name, const std::string& args);

}  // namespace df::reftest
