// backend/cpu/mapped_pages.h over a temporary file: page spans round outwards to whole pages;
// pages evicted from the page cache (page_cache_util.h) are reported missing by mincore, and
// are resident with the same bytes after advise_willneed + touch_pages; a range that is not
// mapped counts as resident.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/mapped_pages.h"
#include "page_cache_util.h"
#include "test_util.h"

namespace df {
namespace {

using cpu::page_size;
using cpu::PageSpan;

TEST(MappedPages, SpanCoversWholePages) {
  const size_t ps = page_size();
  EXPECT_GE(ps, size_t{4096});
  EXPECT_EQ(ps & (ps - 1), size_t{0});
  alignas(64) static uint8_t dummy[1];
  const auto base = reinterpret_cast<uintptr_t>(dummy) / ps * ps;
  const auto* b = reinterpret_cast<const uint8_t*>(base);
  PageSpan s = cpu::page_span(b + 100, 1);
  EXPECT_EQ(s.first, b);
  EXPECT_EQ(s.pages, 1);
  s = cpu::page_span(b + ps - 1, 2);  // straddles a boundary
  EXPECT_EQ(s.first, b);
  EXPECT_EQ(s.pages, 2);
  s = cpu::page_span(b, 3 * ps);  // exactly three pages
  EXPECT_EQ(s.pages, 3);
  EXPECT_EQ(cpu::page_span(b, 0).pages, 0);
  EXPECT_EQ(cpu::page_span(nullptr, 10).pages, 0);
}

// A mapped file of `pages` pages whose byte i is (i * 7 + i / 4096) & 0xff.
struct MappedFile {
  std::string path;
  int fd = -1;
  uint8_t* map = nullptr;
  size_t bytes = 0;
  static uint8_t byte_at(size_t i) { return static_cast<uint8_t>((i * 7 + i / 4096) & 0xff); }
  MappedFile(const std::string& p, int64_t pages) : path(p), bytes(static_cast<size_t>(pages) * page_size()) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(byte_at(i));
    testutil::write_file(path, data);
    fd = ::open(path.c_str(), O_RDONLY);
    void* m = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) map = static_cast<uint8_t*>(m);
  }
  ~MappedFile() {
    if (map) ::munmap(map, bytes);
    if (fd >= 0) ::close(fd);
  }
  bool bytes_intact() const {
    for (size_t i = 0; i < bytes; i += 997)
      if (map[i] != byte_at(i)) return false;
    return true;
  }
};

TEST(MappedPages, EvictedPagesAreMissingUntilFaultedIn) {
  const int64_t pages = 256;
  MappedFile f(testutil::test_dir(DF_UNIT_WORK_DIR) + "/pages.bin", pages);
  ASSERT_NE(f.map, nullptr);
  const PageSpan all = cpu::page_span(f.map, f.bytes);
  ASSERT_EQ(all.pages, pages);
  std::vector<unsigned char> vec;
  cpu::touch_pages(all);
  EXPECT_EQ(cpu::missing_pages(all, vec), 0) << "touched pages are resident";

  ASSERT_TRUE(testutil::evict_file_pages(f.path, f.map, f.bytes));
  const int64_t missing = cpu::missing_pages(all, vec);
  if (missing == 0) GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) evicted no page of the file here";
  EXPECT_LE(missing, pages);
  int64_t counted = 0;  // missing_pages' count is the vector's non-resident entries
  for (int64_t i = 0; i < pages; ++i) counted += (vec[static_cast<size_t>(i)] & 1) == 0;
  EXPECT_EQ(counted, missing);

  // the second half only: the first half's missing pages stay missing
  const PageSpan first = cpu::page_span(f.map, f.bytes / 2), second = cpu::page_span(f.map + f.bytes / 2, f.bytes / 2);
  const int64_t missing_first = cpu::missing_pages(first, vec);
  cpu::advise_willneed(second);
  cpu::touch_pages(second);
  EXPECT_EQ(cpu::missing_pages(second, vec), 0);
  EXPECT_EQ(cpu::missing_pages(first, vec), missing_first);

  cpu::advise_willneed(all);
  cpu::touch_pages(all);
  EXPECT_EQ(cpu::missing_pages(all, vec), 0);
  EXPECT_TRUE(f.bytes_intact()) << "faulting in changed no byte";
}

// missing_pages_each (runs of nearby spans in one mincore) counts what one call per span counts,
// over a file with every third page resident.
TEST(MappedPages, EachSpanCountedAsAlone) {
  const int64_t pages = 300;
  MappedFile f(testutil::test_dir(DF_UNIT_WORK_DIR) + "/each.bin", pages);
  ASSERT_NE(f.map, nullptr);
  const size_t ps = page_size();
  ASSERT_TRUE(testutil::evict_file_pages(f.path, f.map, f.bytes));
  ::madvise(f.map, f.bytes, MADV_RANDOM);  // a touch reads its page alone
  for (int64_t i = 0; i < pages; i += 3) cpu::touch_pages(cpu::page_span(f.map + ps * static_cast<size_t>(i), 1));
  std::vector<unsigned char> vec;
  if (cpu::missing_pages(cpu::page_span(f.map, f.bytes), vec) == 0)
    GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) evicted no page of the file here";
  // ascending, non-overlapping spans with gaps of 0, 1, 5 and 100 pages (byte ranges that
  // start and end inside pages)
  std::vector<PageSpan> spans;
  for (const auto& [p0, n] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 7}, {12, 1}, {18, 30}, {148, 20}, {168, 2}})
    spans.push_back(cpu::page_span(f.map + ps * static_cast<size_t>(p0) + 10, ps * static_cast<size_t>(n) - 20));
  std::vector<int64_t> want;
  for (const PageSpan& s : spans) want.push_back(cpu::missing_pages(s, vec));
  for (int64_t gap : {0, 1, 5, 1000}) {
    std::vector<int64_t> got(spans.size(), -1);
    cpu::missing_pages_each(spans, gap, vec, got.data());
    EXPECT_EQ(got, want) << "merge gap " << gap;
  }
}

TEST(MappedPages, UnmappedRangeCountsResident) {
  const size_t bytes = 4 * page_size();
  void* m = ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ::munmap(m, bytes);  // the address range is now unmapped: mincore fails (ENOMEM)
  std::vector<unsigned char> vec;
  EXPECT_EQ(cpu::missing_pages(cpu::page_span(m, bytes), vec), 0);
}

}  // namespace
}  // namespace df
