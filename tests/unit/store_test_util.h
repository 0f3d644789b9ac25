// Shared pieces of the store tests: generated GGUFs, a temporary store folder, fast retry
// settings, file helpers.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "store/download.h"
#include "store/sha256.h"

namespace df::test {

// A valid GGUF of n_tensors F32 tensors of `elems` random floats each (plus a little metadata).
inline std::shared_ptr<std::vector<uint8_t>> make_test_gguf(int n_tensors, int64_t elems, uint32_t seed) {
  gguf::Writer w;
  w.set_string("general.architecture", "test");
  w.set_string("general.name", "store-test-" + std::to_string(seed));
  w.set_string_array("test.words", {"alpha", "beta", "gamma"});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int i = 0; i < n_tensors; ++i) {
    std::vector<float> v(static_cast<size_t>(elems));
    for (float& x : v) x = u(rng);
    w.add_tensor("blk." + std::to_string(i) + ".w", GgmlType::F32, {elems}, v.data(), v.size() * sizeof(float));
  }
  return std::make_shared<std::vector<uint8_t>>(w.to_bytes());
}

inline std::string sha256_of(const std::vector<uint8_t>& b) {
  store::Sha256 h;
  h.update(b.data(), b.size());
  return h.finish();
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const uint8_t* p, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "df_store_XXXXXX").string();
    path = mkdtemp(t.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Retries in milliseconds, not seconds.
inline store::TransferOptions fast_transfer() {
  store::TransferOptions o;
  o.http.backoff_initial_s = 0.001;
  o.http.backoff_max_s = 0.004;
  o.http.max_retries = 4;
  o.http.connect_timeout_s = 5;
  o.http.low_speed_time_s = 10;
  return o;
}

}  // namespace df::test
