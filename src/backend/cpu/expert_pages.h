// Which pages of a stack of experts a MoE call reads: the used experts of a routing (all rows
// at once), each one's page span, and the spans joined into the fewest ranges that cover
// exactly those pages (one madvise each). Pure functions over addresses: nothing is read.
// Used by the CPU backend's expert prefetch and expert stats (CpuOptions::expert_prefetch,
// CpuOptions::expert_stats).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/mapped_pages.h"

namespace df::cpu {

// The experts that ids [n, k] (i32, each in [0, n_expert)) names in any row, ascending, each
// once -> out. Throws df::Error on an id out of range.
void used_experts(const Tensor& ids, int64_t n_expert, std::vector<int64_t>& out);

// The pages of the experts `experts` (ascending, distinct) of a stack whose expert e lies at
// [base + e * expert_bytes, + expert_bytes) -> out, one span per expert in order. Experts need
// not start on page boundaries: a page shared with the previous used expert belongs to that
// one (the spans do not overlap and each page is in exactly one; a span may be empty).
void expert_page_spans(const uint8_t* base, size_t expert_bytes, std::span<const int64_t> experts,
                       std::vector<PageSpan>& out);

// Spans sorted by address -> the union of their pages as the fewest spans (ascending): spans
// that overlap or touch are joined, a gap of even one page is not (its pages are not read).
// Empty spans are dropped.
void join_page_spans(std::span<const PageSpan> spans, std::vector<PageSpan>& out);

}  // namespace df::cpu
