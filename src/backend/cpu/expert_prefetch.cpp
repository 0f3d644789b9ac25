// The CPU backend's expert prefetch (CpuOptions::expert_prefetch): once a MoE block's routing
// is known, the pages of the experts its three products will read (all rows of the call) that
// are not in the page cache are advised MADV_WILLNEED together, so that the disk reads them
// while the products before them run. Without it, a product faults the missing pages of a
// mapped stack one at a time (after many misses the kernel reads single pages, no read-around:
// measured ~6x slower decode from disk, bench/cpu/results/cpumoe_2026-12-02.md).
//
// With the expert stats on, the check here is the stats' check (the pages as they were before
// any advice); matmul_id then faults in the pages that were missing, timed as the stall
// (finish_prefetched_experts), instead of checking again.
#include <algorithm>
#include <chrono>

#include "backend/cpu/cpu_backend.h"

namespace df::cpu {

void CpuBackend::moe_experts_routed(const MoeExperts& m) {
  prefetched_.clear();  // an earlier routing's stacks: their products are done
  if (!expert_prefetch_on_ || m.ids.rows == 0) return;
  constexpr int64_t kMergeGapPages = 256;  // as account_mapped_experts: one mincore per nearby run
  const auto c0 = std::chrono::steady_clock::now();
  bool routed = false;
  advise_.clear();
  for (const Tensor* W : {&m.gate_exps, &m.up_exps, &m.down_exps}) {
    // only stacks multiplied from the mapped file (no repacked copy), as the stats
    const Repacked* rp = repacked(*W);
    if ((rp && rp->stack) || !in_mapped_file(W->data, W->nbytes())) continue;
    if (!routed) used_experts(m.ids, m.n_expert, used_), routed = true;
    const size_t expert_bytes = W->stride * static_cast<size_t>(W->rows / m.n_expert);
    expert_page_spans(static_cast<const uint8_t*>(W->data), expert_bytes, used_, spans_);
    missing_.resize(spans_.size());
    missing_pages_each(spans_, kMergeGapPages, mincore_vec_, missing_.data());
    for (size_t i = 0; i < spans_.size(); ++i)
      if (missing_[i] > 0) advise_.push_back(spans_[i]);
    if (expert_stats_on_) {
      count_mapped_experts(spans_, missing_.data());
      prefetched_.push_back({W->data, used_, spans_, missing_});
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (expert_stats_on_) expert_stats_.check_seconds += std::chrono::duration<double>(t0 - c0).count();
  if (advise_.empty()) return;
  // the three stacks lie anywhere in the file: by address, then adjacent experts' pages as one
  // range each (the kernel queues the reads of a range at once)
  std::sort(advise_.begin(), advise_.end(), [](const PageSpan& a, const PageSpan& b) { return a.first < b.first; });
  join_page_spans(advise_, joined_);
  for (const PageSpan& s : joined_) {
    advise_willneed(s);
    prefetch_pages_ += static_cast<uint64_t>(s.pages);
  }
  // the advice's own time counts as stall, as in account_mapped_experts
  if (expert_stats_on_) expert_stats_.stall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CpuBackend::count_mapped_experts(std::span<const PageSpan> spans, const int64_t* missing) {
  const size_t ps = page_size();
  for (size_t i = 0; i < spans.size(); ++i) {
    ++expert_stats_.lookups;
    if (missing[i] == 0) {
      ++expert_stats_.hits;
      continue;
    }
    ++expert_stats_.misses;
    expert_stats_.bytes_from_disk += static_cast<uint64_t>(missing[i]) * ps;
  }
}

bool CpuBackend::finish_prefetched_experts(const Tensor& W, const int64_t* experts, int64_t n_used) {
  auto it = std::find_if(prefetched_.begin(), prefetched_.end(), [&](const PrefetchedStack& p) { return p.stack == W.data; });
  if (it == prefetched_.end()) return false;
  const bool same = std::equal(it->experts.begin(), it->experts.end(), experts, experts + n_used);
  if (same) {
    // the pages that were missing when checked: each read waits for its page (advised before)
    const auto t0 = std::chrono::steady_clock::now();
    bool any = false;
    for (size_t i = 0; i < it->spans.size(); ++i)
      if (it->missing[i] > 0) touch_pages(it->spans[i]), any = true;
    if (any) expert_stats_.stall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  prefetched_.erase(it);  // used once; other experts (not the routing's) are checked as usual
  return same;
}

}  // namespace df::cpu
