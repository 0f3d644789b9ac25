// RangeReader (src/backend/range_reader.h): byte ranges of a file at any offset and length,
// read through O_DIRECT (aligned staging) or buffered, give the file's bytes; a range past the
// end, a file truncated after it was opened, unaligned staging and a missing file are
// df::Errors with a message, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/range_reader.h"
#include "common/error.h"
#include "test_util.h"

namespace df {
namespace {

struct Aligned {
  explicit Aligned(size_t bytes)
      : p(static_cast<uint8_t*>(std::aligned_alloc(RangeReader::kAlign, (bytes + RangeReader::kAlign - 1) /
                                                                            RangeReader::kAlign * RangeReader::kAlign))) {}
  ~Aligned() { std::free(p); }
  uint8_t* p;
};

std::string random_file(const std::string& dir, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(n, '\0');
  for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
  const std::string path = dir + "/data.bin";
  testutil::write_file(path, bytes);
  return path;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Offsets and lengths around block boundaries, in the middle, up to the last byte.
TEST(RangeReader, ArbitraryRangesGiveTheFileBytes) {
  const size_t size = 5 * RangeReader::kAlign + 1234;  // not a multiple of the block
  const std::string path = random_file(testutil::test_dir(DF_UNIT_WORK_DIR), size, 7);
  const std::string want = testutil::read_file(path);
  ASSERT_EQ(want.size(), size);
  for (bool direct : {true, false}) {
    RangeReader r(path, direct);
    EXPECT_EQ(r.size(), size);
    if (!direct) {
      EXPECT_FALSE(r.direct());
    }
    std::vector<std::pair<uint64_t, size_t>> cases = {
        {0, 0}, {0, 1}, {0, 4096}, {1, 4095}, {4095, 2}, {4096, 4096}, {100, 3 * 4096 + 17}, {size - 1, 1},
        {size - 1234, 1234}, {size - 5000, 5000}, {0, size}, {3, size - 3}, {size, 0}};
    std::mt19937 rng(3);
    for (int i = 0; i < 200; ++i) {
      const uint64_t off = rng() % size;
      cases.emplace_back(off, rng() % (size - off + 1));
    }
    for (const auto& [off, len] : cases) {
      Aligned st(RangeReader::staging_bytes(len));
      const uint8_t* got = r.read(off, len, st.p);
      ASSERT_GE(got, st.p);
      ASSERT_LE(got + len, st.p + RangeReader::staging_bytes(len));
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(got), len), want.substr(off, len))
          << "offset " << off << " length " << len << (r.direct() ? " (O_DIRECT)" : " (buffered)");
    }
    if (direct) std::printf("RangeReader on %s: %s\n", path.c_str(), r.direct() ? "O_DIRECT" : "buffered (O_DIRECT refused)");
  }
}

TEST(RangeReader, PastTheEndIsAnError) {
  const size_t size = 3 * RangeReader::kAlign + 10;
  const std::string path = random_file(testutil::test_dir(DF_UNIT_WORK_DIR), size, 8);
  RangeReader r(path, true);
  Aligned st(RangeReader::staging_bytes(8192));
  EXPECT_NE(message_of([&] { r.read(size - 10, 11, st.p); }).find("past the end"), std::string::npos);
  EXPECT_NE(message_of([&] { r.read(size + 1, 0, st.p); }).find("past the end"), std::string::npos);
  EXPECT_NE(message_of([&] { r.read(~0ull - 4, 8, st.p); }).find("past the end"), std::string::npos);
  EXPECT_NE(message_of([&] { r.read(0, 16, st.p + 1); }).find("not aligned"), std::string::npos);
}

// The file shrinks after the reader opened it (its size is the one at open): a read of what
// is gone says the file ends early, through O_DIRECT and buffered alike.
TEST(RangeReader, FileTruncatedAfterOpenIsAnError) {
  for (bool direct : {true, false}) {
    const size_t size = 8 * RangeReader::kAlign + 300;
    const std::string path = random_file(testutil::test_dir(DF_UNIT_WORK_DIR), size, 9);
    RangeReader r(path, direct);
    ASSERT_EQ(::truncate(path.c_str(), 3 * RangeReader::kAlign + 5), 0);
    Aligned st(RangeReader::staging_bytes(size));
    const std::string m = message_of([&] { r.read(2 * RangeReader::kAlign, 3 * RangeReader::kAlign, st.p); });
    EXPECT_NE(m.find("file ends at byte"), std::string::npos) << m;
    EXPECT_NE(m.find(path), std::string::npos) << m;
    const std::string m2 = message_of([&] { r.read(6 * RangeReader::kAlign + 7, 100, st.p); });
    EXPECT_NE(m2.find("file ends at byte"), std::string::npos) << m2;
    // What is left still reads.
    const std::string want = testutil::read_file(path);
    const uint8_t* got = r.read(10, 3 * RangeReader::kAlign - 5, st.p);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(got), 3 * RangeReader::kAlign - 5),
              want.substr(10, 3 * RangeReader::kAlign - 5));
  }
}

TEST(RangeReader, MissingFileIsAnError) {
  const std::string path = testutil::test_dir(DF_UNIT_WORK_DIR) + "/no_such_file.bin";
  EXPECT_NE(message_of([&] { RangeReader r(path, true); }).find("cannot open"), std::string::npos);
}

}  // namespace
}  // namespace df
