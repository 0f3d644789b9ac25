#include "ref_harness.h"

#include <cstring>
#include <filesystem>

namespace df::reftest {

std::string work_dir() { return testutil::test_dir(DF_WORK_DIR); }

std::vector<float> read_floats(const std::string& path) {
  const std::string b = read_file(path);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

double normalised_error(const float* ref, const float* got, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(ref[i]) - got[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? num : num / den;
}

std::string make_model(const std::string& name, const std::string& args) {
  return testutil::make_model_in(work_dir(), name, args);
}

}  // namespace df::reftest
