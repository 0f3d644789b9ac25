#include "backend/cpu/mapped_pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace df::cpu {

size_t page_size() {
  static const size_t size = [] {
    const long s = ::sysconf(_SC_PAGESIZE);
    return s > 0 ? static_cast<size_t>(s) : size_t{4096};
  }();
  return size;
}

PageSpan page_span(const void* p, size_t bytes) {
  if (!p || bytes == 0) return {};
  const uintptr_t ps = page_size();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = a / ps * ps, end = (a + bytes + ps - 1) / ps * ps;
  return {reinterpret_cast<const uint8_t*>(first), static_cast<int64_t>((end - first) / ps)};
}

int64_t missing_pages(const PageSpan& s, std::vector<unsigned char>& vec) {
  if (s.pages <= 0) return 0;
  if (vec.size() < static_cast<size_t>(s.pages)) vec.resize(static_cast<size_t>(s.pages));
  const size_t len = static_cast<size_t>(s.pages) * page_size();
  if (::mincore(const_cast<uint8_t*>(s.first), len, vec.data()) != 0) return 0;
  int64_t missing = 0;
  for (int64_t i = 0; i < s.pages; ++i) missing += (vec[static_cast<size_t>(i)] & 1) == 0;
  return missing;
}

void missing_pages_each(std::span<const PageSpan> spans, int64_t merge_gap, std::vector<unsigned char>& vec,
                        int64_t* missing) {
  const size_t ps = page_size();
  size_t g0 = 0;
  while (g0 < spans.size()) {
    // the run [g0, g1): spans whose gap to the run's end is at most merge_gap pages
    const uint8_t* first = spans[g0].first;
    const uint8_t* end = first + ps * static_cast<size_t>(spans[g0].pages);
    size_t g1 = g0 + 1;
    for (; g1 < spans.size(); ++g1) {
      const PageSpan& s = spans[g1];
      if (s.first > end + ps * static_cast<size_t>(merge_gap)) break;
      end = std::max(end, s.first + ps * static_cast<size_t>(s.pages));
    }
    const PageSpan run{first, static_cast<int64_t>(static_cast<size_t>(end - first) / ps)};
    const int64_t total = missing_pages(run, vec);
    for (size_t i = g0; i < g1; ++i) {
      int64_t m = 0;
      if (total > 0) {
        const size_t o = static_cast<size_t>(spans[i].first - first) / ps;
        for (int64_t j = 0; j < spans[i].pages; ++j) m += (vec[o + static_cast<size_t>(j)] & 1) == 0;
      }
      missing[i] = m;
    }
    g0 = g1;
  }
}

void advise_willneed(const PageSpan& s) {
  if (s.pages <= 0) return;
  // advice only: a failure (a kernel that ignores it) leaves touch_pages to fault page by page
  (void)::madvise(const_cast<uint8_t*>(s.first), static_cast<size_t>(s.pages) * page_size(), MADV_WILLNEED);
}

void touch_pages(const PageSpan& s) {
  const size_t ps = page_size();
  // volatile reads: not optimised away, each one waits for its page
  for (int64_t i = 0; i < s.pages; ++i) (void)*static_cast<const volatile uint8_t*>(s.first + ps * static_cast<size_t>(i));
}

}  // namespace df::cpu
