#include "backend/cpu/expert_pages.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace df::cpu {

void used_experts(const Tensor& ids, int64_t n_expert, std::vector<int64_t>& out) {
  // a mark per expert, then the marked ones in order: ascending ids, each once
  std::vector<uint8_t> mark(static_cast<size_t>(n_expert), 0);
  for (int64_t r = 0; r < ids.rows; ++r) {
    const auto* id = reinterpret_cast<const int32_t*>(static_cast<const uint8_t*>(ids.data) + ids.stride * static_cast<size_t>(r));
    for (int64_t j = 0; j < ids.cols; ++j) {
      if (id[j] < 0 || id[j] >= n_expert) throw Error("used_experts: expert id " + std::to_string(id[j]) + " out of range");
      mark[static_cast<size_t>(id[j])] = 1;
    }
  }
  out.clear();
  for (int64_t e = 0; e < n_expert; ++e)
    if (mark[static_cast<size_t>(e)]) out.push_back(e);
}

void expert_page_spans(const uint8_t* base, size_t expert_bytes, std::span<const int64_t> experts,
                       std::vector<PageSpan>& out) {
  const size_t ps = page_size();
  out.clear();
  const uint8_t* prev_end = nullptr;
  for (const int64_t e : experts) {
    PageSpan s = page_span(base + expert_bytes * static_cast<size_t>(e), expert_bytes);
    // at most the first page is shared with the previous used expert (ascending, distinct ids)
    if (prev_end && s.first < prev_end) s.first = prev_end, s.pages = std::max<int64_t>(0, s.pages - 1);
    prev_end = s.first + ps * static_cast<size_t>(s.pages);
    out.push_back(s);
  }
}

void join_page_spans(std::span<const PageSpan> spans, std::vector<PageSpan>& out) {
  const size_t ps = page_size();
  out.clear();
  const uint8_t* end = nullptr;  // the last joined span's end
  for (const PageSpan& s : spans) {
    if (s.pages <= 0) continue;
    const uint8_t* s_end = s.first + ps * static_cast<size_t>(s.pages);
    if (!out.empty() && s.first <= end) {
      if (s_end > end) end = s_end, out.back().pages = static_cast<int64_t>(static_cast<size_t>(end - out.back().first) / ps);
      continue;
    }
    out.push_back(s);
    end = s_end;
  }
}

}  // namespace df::cpu
