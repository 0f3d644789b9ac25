#include "ref_harness.h"

#include <array>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace df::reftest {

std::string run(const std::string& cmd) {
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

std::string work_dir() {
  const std::string d = DF_WORK_DIR;
  std::filesystem::create_directories(d);
  return d;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

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
  const std::string path = work_dir() + "/" + name + ".gguf";
  run(std::string(DF_MAKE_MODEL) + " -o " + path + " --vocab-text " + DF_SOURCE_DIR +
      "/tools/make_model/vocab_corpus.txt " + args + " 2>&1");
  return path;
}

}  // namespace df::reftest
