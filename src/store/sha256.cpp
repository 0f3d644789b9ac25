#include "store/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace df::store {

namespace {
EVP_MD_CTX* md(void* p) { return static_cast<EVP_MD_CTX*>(p); }
}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_) throw Error("sha256: out of memory");
  reset();
}
Sha256::~Sha256() { EVP_MD_CTX_free(md(ctx_)); }

void Sha256::reset() {
  if (EVP_DigestInit_ex(md(ctx_), EVP_sha256(), nullptr) != 1) throw Error("sha256: EVP_DigestInit_ex failed");
}

void Sha256::update(const void* data, size_t n) {
  if (n && EVP_DigestUpdate(md(ctx_), data, n) != 1) throw Error("sha256: EVP_DigestUpdate failed");
}

std::string Sha256::finish() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(md(ctx_), d, &len) != 1) throw Error("sha256: EVP_DigestFinal_ex failed");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[d[i] >> 4];
    s += hex[d[i] & 15];
  }
  reset();
  return s;
}

uint64_t sha256_update_from_file(Sha256& h, const std::string& path, uint64_t limit) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error("cannot open '" + path + "' to hash it: " + std::strerror(errno));
  std::vector<unsigned char> buf(1 << 20);
  uint64_t done = 0;
  while (done < limit) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), limit - done));
    const size_t got = std::fread(buf.data(), 1, want, f);
    h.update(buf.data(), got);
    done += got;
    if (got < want) break;
  }
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) throw Error("error reading '" + path + "' to hash it");
  return done;
}

std::string sha256_file(const std::string& path) {
  Sha256 h;
  sha256_update_from_file(h, path);
  return h.finish();
}

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace df::store
