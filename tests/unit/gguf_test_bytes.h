// Hand-rolled GGUF byte builder for tests: writes exactly what the format spec says, field by
// field, independent of df::gguf::Writer, so corrupt files can be made on purpose.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::gguf::test {

struct RawGguf {
  std::vector<uint8_t> b;

  template <class T>
  RawGguf& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  RawGguf& u8(uint8_t v) { return put(v); }
  RawGguf& u32(uint32_t v) { return put(v); }
  RawGguf& u64(uint64_t v) { return put(v); }
  RawGguf& i64(int64_t v) { return put(v); }
  RawGguf& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  RawGguf& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  RawGguf& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  RawGguf& kv_str(const std::string& key, const std::string& v) { return str(key).u32(8).str(v); }
  // Tensor info: name, n_dims, dims, type id, offset.
  RawGguf& tensor(const std::string& name, const std::vector<int64_t>& ne, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) i64(d);
    return u32(type).u64(offset);
  }
  RawGguf& pad(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  RawGguf& zeros(size_t n) {
    b.insert(b.end(), n, 0);
    return *this;
  }
};

// Expects parsing to throw df::Error whose message contains every given substring.
// The copy is sized exactly so AddressSanitizer sees any read past the end.
inline void expect_parse_error(const std::vector<uint8_t>& bytes,
                               const std::vector<std::string>& substrings) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() ? bytes.size() : 1]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  try {
    File::from_memory(copy.get(), bytes.size());
    ADD_FAILURE() << "parsed without error; expected '" << substrings.front() << "'";
  } catch (const df::Error& e) {
    const std::string msg = e.what();
    for (const auto& s : substrings)
      EXPECT_NE(msg.find(s), std::string::npos) << "message: " << msg << "\nmissing: " << s;
  }
}

}  // namespace df::gguf::test
