// The CPU backend's expert prefetch (CpuOptions::expert_prefetch): once a MoE block's routing
// is known, the pages of the experts its three products will read (all rows of the call) that
// are not in the page cache are advised MADV_WILLNEED together, so that the disk reads them
// while the products before them run. Without it, a product faults the missing pages of a
// mapped stack one at a time (after many misses the kernel reads single pages, no read-around:
// measured ~6x slower decode from disk, bench/cpu/results/cpumoe_2026-12-02.md).
//
// The forecast (CpuOptions::expert_forecast, moe_forecast) advises the experts that the block's
// router picks from the residual stream before the layer's mixer, so the disk reads them
// while the mixer runs; the routing then compares (ExpertStats::forecast_*) and advises what
// the forecast missed. The forecast from the drafts (CpuOptions::expert_draft_forecast,
// MoeForecast::draft) does the same from the verify rows' token embeddings for every block
// before the verify; kept and compared apart (ExpertStats::draft_forecast_*).
//
// With the expert stats on, the check here is the stats' check (the pages as they were before
// any advice); matmul_id then faults in the pages that were missing, timed as the stall
// (finish_prefetched_experts), instead of checking again.
#include <algorithm>
#include <chrono>

#include "backend/cpu/cpu_backend.h"

namespace df::cpu {

bool CpuBackend::stack_on_mapped_pages(const Tensor& W) const {
  const Repacked* rp = repacked(W);
  return !(rp && rp->stack) && in_mapped_file(W.data, W.nbytes());
}

void CpuBackend::check_missing_experts(std::span<const Tensor* const> Ws, int64_t n_expert,
                                       std::span<const int64_t> used, std::vector<PrefetchedStack>* checked) {
  constexpr int64_t kMergeGapPages = 256;  // as account_mapped_experts: one mincore per nearby run
  advise_.clear();
  for (const Tensor* W : Ws) {
    const size_t expert_bytes = W->stride * static_cast<size_t>(W->rows / n_expert);
    expert_page_spans(static_cast<const uint8_t*>(W->data), expert_bytes, used, spans_);
    missing_.resize(spans_.size());
    missing_pages_each(spans_, kMergeGapPages, mincore_vec_, missing_.data());
    for (size_t i = 0; i < spans_.size(); ++i)
      if (missing_[i] > 0) advise_.push_back(spans_[i]);
    if (checked) checked->push_back({W->data, std::vector<int64_t>(used.begin(), used.end()), spans_, missing_});
  }
}

uint64_t CpuBackend::advise_checked_experts(PageAdvisor* via) {
  if (advise_.empty()) return 0;
  // the stacks lie anywhere in the file: by address, then adjacent experts' pages as one range
  // each (the kernel queues the reads of a range at once)
  std::sort(advise_.begin(), advise_.end(), [](const PageSpan& a, const PageSpan& b) { return a.first < b.first; });
  join_page_spans(advise_, joined_);
  if (via) via->advise(joined_);
  uint64_t pages = 0;
  for (const PageSpan& sp : joined_) {
    if (!via) advise_willneed(sp);
    pages += static_cast<uint64_t>(sp.pages);
  }
  return pages;
}

void CpuBackend::moe_experts_routed(const MoeExperts& m) {
  prefetched_.clear();  // an earlier routing's stacks: their products are done
  if (m.ids.rows == 0) return;
  const Tensor* mapped[3];
  size_t n_mapped = 0;
  for (const Tensor* W : {&m.gate_exps, &m.up_exps, &m.down_exps})  // only stacks multiplied from the mapped file
    if (stack_on_mapped_pages(*W)) mapped[n_mapped++] = W;
  const auto of_block = [&](const auto& f) { return f.first == m.gate_exps.data; };
  auto fc = std::find_if(forecasts_.begin(), forecasts_.end(), of_block);
  auto dc = std::find_if(draft_forecasts_.begin(), draft_forecasts_.end(), of_block);
  if (n_mapped == 0 || (!expert_prefetch_on_ && fc == forecasts_.end() && dc == draft_forecasts_.end())) return;
  const auto c0 = std::chrono::steady_clock::now();
  used_experts(m.ids, m.n_expert, used_);
  // how well this block's forecasts did (each compared once, with the routing that follows it)
  const auto score = [&](const std::vector<int64_t>& f, uint64_t& routed, uint64_t& hits) {
    routed += used_.size();
    for (int64_t e : used_) hits += std::binary_search(f.begin(), f.end(), e) ? 1 : 0;
  };
  if (fc != forecasts_.end()) {
    score(fc->second, expert_stats_.forecast_routed, expert_stats_.forecast_hits);
    forecasts_.erase(fc);
  }
  if (dc != draft_forecasts_.end()) {
    score(dc->second, expert_stats_.draft_forecast_routed, expert_stats_.draft_forecast_hits);
    draft_forecasts_.erase(dc);
  }
  if (!expert_prefetch_on_) return;
  check_missing_experts(std::span<const Tensor* const>(mapped, n_mapped), m.n_expert, used_,
                        expert_stats_on_ ? &prefetched_ : nullptr);
  for (const PrefetchedStack& p : prefetched_) count_mapped_experts(p.spans, p.missing.data());
  const auto t0 = std::chrono::steady_clock::now();
  if (expert_stats_on_) expert_stats_.check_seconds += std::chrono::duration<double>(t0 - c0).count();
  prefetch_pages_ += advise_checked_experts(nullptr);
  // the advice's own time counts as stall, as in account_mapped_experts
  if (expert_stats_on_ && !advise_.empty())
    expert_stats_.stall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void CpuBackend::moe_forecast(const MoeForecast& f) {
  if (!wants_moe_forecast(f.draft) || f.x.rows == 0) return;
  if (f.draft && expert_draft_forecast_blocks_ > 0 && f.block >= expert_draft_forecast_blocks_) return;
  const Tensor* mapped[3];
  size_t n_mapped = 0;
  for (const Tensor* W : {&f.gate_exps, &f.up_exps, &f.down_exps})
    if (stack_on_mapped_pages(*W)) mapped[n_mapped++] = W;
  if (n_mapped == 0) return;  // every expert of the block is in memory already
  const auto t0 = std::chrono::steady_clock::now();
  // the router over rms_norm(x, norm): logits [n, E]; each row's top n_used experts
  rms_norm(f.x, f.norm, f.eps, f.xn);
  matmul(f.router, f.xn, f.logits);
  const int64_t E = f.n_expert, k = std::min(f.n_used, f.n_expert);
  std::vector<int64_t> predicted;  // moved into forecasts_ below
  std::vector<int32_t>& order = forecast_order_;
  order.resize(static_cast<size_t>(E));
  for (int64_t r = 0; r < f.logits.rows; ++r) {
    const float* l = reinterpret_cast<const float*>(static_cast<const uint8_t*>(f.logits.data) + r * f.logits.stride);
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
    predicted.insert(predicted.end(), order.begin(), order.begin() + k);
  }
  std::sort(predicted.begin(), predicted.end());
  predicted.erase(std::unique(predicted.begin(), predicted.end()), predicted.end());
  ExpertStats& st = expert_stats_;
  (f.draft ? st.draft_forecast_experts : st.forecast_experts) += predicted.size();
  check_missing_experts(std::span<const Tensor* const>(mapped, n_mapped), E, predicted, nullptr);
  if (!advisor_) advisor_ = std::make_unique<PageAdvisor>();
  // advised by the advisor's thread
  (f.draft ? st.draft_forecast_pages : st.forecast_pages) += advise_checked_experts(advisor_.get());
  Forecasts& list = f.draft ? draft_forecasts_ : forecasts_;
  auto it = std::find_if(list.begin(), list.end(), [&](const auto& p) { return p.first == f.gate_exps.data; });
  if (it == list.end()) list.emplace_back(f.gate_exps.data, std::move(predicted));
  else it->second = std::move(predicted);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (f.draft) {
    ++st.draft_forecasts;
    st.draft_forecast_seconds += dt;
  } else {
    st.forecast_seconds += dt;
  }
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
