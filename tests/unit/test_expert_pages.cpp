// backend/cpu/expert_pages.h, pure functions over addresses (no page is read): the used experts
// of a routing (all rows, ascending, each once), each one's page span (a page shared by two
// used experts belongs to the first), and the joined ranges the prefetch advises, which must
// cover exactly the pages holding a used expert's byte: none missing, none other. Checked
// against a page-by-page brute force over random routings, expert sizes and stack placements.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/expert_pages.h"
#include "common/error.h"

namespace df {
namespace {

using cpu::page_size;
using cpu::PageSpan;

// A fake page-aligned address (never dereferenced).
const uint8_t* fake_base(size_t page) { return reinterpret_cast<const uint8_t*>(uintptr_t{1} << 40) + page * page_size(); }

// The page indices (from address 0) of a span.
std::set<uintptr_t> pages_of(const PageSpan& s) {
  std::set<uintptr_t> out;
  for (int64_t i = 0; i < s.pages; ++i) out.insert(reinterpret_cast<uintptr_t>(s.first) / page_size() + static_cast<uintptr_t>(i));
  return out;
}
// The pages holding any byte of [p, p + bytes), byte by byte in page steps (the brute force).
void add_byte_pages(const uint8_t* p, size_t bytes, std::set<uintptr_t>& out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  for (uintptr_t b = a; b < a + bytes; b = (b / page_size() + 1) * page_size()) out.insert(b / page_size());
}

Tensor ids_tensor(std::vector<int32_t>& v, int64_t rows, int64_t cols, int64_t row_elems) {
  Tensor t;
  t.data = v.data();
  t.type = GgmlType::I32;
  t.rows = rows, t.cols = cols;
  t.stride = static_cast<size_t>(row_elems) * sizeof(int32_t);
  return t;
}

TEST(ExpertPages, UsedExpertsOfAllRowsAscendingOnce) {
  // 3 rows of 2 slots in rows of 3 elements (a strided view: the third element is not an id)
  std::vector<int32_t> v = {5, 1, 99, 1, 7, 99, 0, 5, 99};
  std::vector<int64_t> used;
  cpu::used_experts(ids_tensor(v, 3, 2, 3), 8, used);
  EXPECT_EQ(used, (std::vector<int64_t>{0, 1, 5, 7}));
  cpu::used_experts(ids_tensor(v, 1, 2, 3), 8, used);  // the first row alone
  EXPECT_EQ(used, (std::vector<int64_t>{1, 5}));
  std::vector<int32_t> bad = {2, 8};
  EXPECT_THROW(cpu::used_experts(ids_tensor(bad, 1, 2, 2), 8, used), Error);
  bad = {-1, 2};
  EXPECT_THROW(cpu::used_experts(ids_tensor(bad, 1, 2, 2), 8, used), Error);
}

TEST(ExpertPages, SpansSplitSharedPagesToTheFirstExpert) {
  const size_t ps = page_size();
  const uint8_t* base = fake_base(10) + 100;  // experts start 100 bytes into a page
  std::vector<PageSpan> spans;
  const std::vector<int64_t> experts = {0, 1, 3};
  cpu::expert_page_spans(base, ps + 200, experts, spans);  // each expert 1 page + 200 bytes
  ASSERT_EQ(spans.size(), 3u);
  // expert 0: [100, ps + 300) -> pages 10, 11; expert 1: [ps + 300, 2 ps + 500) -> pages 11, 12,
  // its page 11 the first's; expert 3: [3 ps + 700, 4 ps + 900) -> pages 13, 14
  EXPECT_EQ(spans[0].first, fake_base(10));
  EXPECT_EQ(spans[0].pages, 2);
  EXPECT_EQ(spans[1].first, fake_base(12));
  EXPECT_EQ(spans[1].pages, 1);
  EXPECT_EQ(spans[2].first, fake_base(13));
  EXPECT_EQ(spans[2].pages, 2);
  std::vector<PageSpan> joined;
  cpu::join_page_spans(spans, joined);  // pages 10..14, no gap
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].first, fake_base(10));
  EXPECT_EQ(joined[0].pages, 5);
  // experts of 2 pages, 0 and 2 used: expert 1's pages 22, 23 stay a gap between two ranges
  cpu::expert_page_spans(fake_base(20), 2 * ps, std::vector<int64_t>{0, 2}, spans);
  cpu::join_page_spans(spans, joined);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_EQ(joined[0].first, fake_base(20));
  EXPECT_EQ(joined[0].pages, 2);
  EXPECT_EQ(joined[1].first, fake_base(24));
  EXPECT_EQ(joined[1].pages, 2);
}

TEST(ExpertPages, AdviceCoversExactlyTheUsedExpertsPages) {
  const size_t ps = page_size();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t n_expert = 1 + static_cast<int64_t>(rng() % 64);
    // expert sizes from a few bytes to several pages, aligned to 32 (a GGUF tensor's alignment)
    const size_t expert_bytes = 32 * (1 + rng() % (4 * ps / 32 * 3));
    // three stacks (gate, up, down) one after another at a 32-byte-aligned offset, in any order
    const uint8_t* base = fake_base(1000) + 32 * (rng() % (ps / 32));
    const size_t stack_bytes = expert_bytes * static_cast<size_t>(n_expert);
    const uint8_t* stacks[3] = {base + stack_bytes, base, base + 2 * stack_bytes + 32 * (rng() % 3)};
    // a routing of n rows of k slots
    const int64_t k = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(n_expert, 8));
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 5);
    std::vector<int32_t> ids;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int32_t> perm(static_cast<size_t>(n_expert));
      for (int64_t e = 0; e < n_expert; ++e) perm[static_cast<size_t>(e)] = static_cast<int32_t>(e);
      std::shuffle(perm.begin(), perm.end(), rng);
      ids.insert(ids.end(), perm.begin(), perm.begin() + k);
    }
    std::vector<int64_t> used;
    cpu::used_experts(ids_tensor(ids, rows, k, k), n_expert, used);
    std::set<uintptr_t> want;  // every page holding a byte of a used expert of a stack
    for (const int32_t e : ids)
      for (const uint8_t* s : stacks) add_byte_pages(s + expert_bytes * static_cast<size_t>(e), expert_bytes, want);
    std::vector<PageSpan> all, spans;
    for (const uint8_t* s : stacks) {
      cpu::expert_page_spans(s, expert_bytes, used, spans);
      ASSERT_EQ(spans.size(), used.size());
      std::set<uintptr_t> seen;  // within a stack, each page in exactly one span
      for (const PageSpan& p : spans)
        for (uintptr_t q : pages_of(p)) ASSERT_TRUE(seen.insert(q).second) << "trial " << trial << ": page in two spans";
      all.insert(all.end(), spans.begin(), spans.end());
    }
    std::sort(all.begin(), all.end(), [](const PageSpan& a, const PageSpan& b) { return a.first < b.first; });
    std::vector<PageSpan> joined;
    cpu::join_page_spans(all, joined);
    std::set<uintptr_t> got;
    for (size_t i = 0; i < joined.size(); ++i) {
      ASSERT_GT(joined[i].pages, 0);
      if (i > 0) {  // ascending, a gap of at least one page between ranges
        ASSERT_GT(joined[i].first, joined[i - 1].first + ps * static_cast<size_t>(joined[i - 1].pages)) << "trial " << trial;
      }
      for (uintptr_t q : pages_of(joined[i])) got.insert(q);
    }
    ASSERT_EQ(got, want) << "trial " << trial << ": " << n_expert << " experts of " << expert_bytes << " bytes, "
                         << used.size() << " used";
  }
}

}  // namespace
}  // namespace df
