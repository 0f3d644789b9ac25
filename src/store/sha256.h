// SHA-256 (OpenSSL EVP), streamed over pieces or over a whole file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace df::store {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  // Lowercase hex digest; the hasher starts over afterwards.
  std::string finish();
  void reset();

 private:
  void* ctx_;  // EVP_MD_CTX
};

// Hashes the first `limit` bytes of a file (all of it when limit is UINT64_MAX) into h.
// Returns the bytes hashed.
uint64_t sha256_update_from_file(Sha256& h, const std::string& path, uint64_t limit = UINT64_MAX);
std::string sha256_file(const std::string& path);
// True for 64 hex digits (either case).
bool is_sha256_hex(const std::string& s);

}  // namespace df::store
