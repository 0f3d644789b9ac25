// `diskformer bench` on the CPU backend with MoE experts on the model file's mapped pages:
// the expert stats' counters (cpu::ExpertStats) taken around measured runs, and their JSON
// report (the `expert_cache` object of `bench`, the `expert_cache` objects of `bench --spec`).
#pragma once
#include <cstdint>

#include <nlohmann/json.hpp>

#include "backend/backend.h"

namespace df::cli {

// Counters of the CPU backend's expert stats (experts on the file's mapped pages; zeros
// elsewhere, with the stats off, or where every expert stack has a copy).
struct MmapCounts {
  bool on = false;  // stats on and some expert stack on mapped pages
  bool prefetch = false;  // the expert prefetch on (CpuOptions::expert_prefetch)
  uint64_t stacks = 0, lookups = 0, hits = 0, misses = 0, bytes = 0;
  uint64_t advised = 0;  // bytes advised by the prefetch
  double stall_s = 0, check_s = 0;
  bool forecast = false;  // CpuOptions::expert_forecast
  uint64_t fc_experts = 0, fc_routed = 0, fc_hits = 0, fc_bytes = 0;  // ExpertStats::forecast_* (pages as bytes)
  double fc_s = 0;
  bool draft_forecast = false;  // CpuOptions::expert_draft_forecast
  uint64_t dfc_n = 0, dfc_experts = 0, dfc_routed = 0, dfc_hits = 0, dfc_bytes = 0;  // ExpertStats::draft_forecast*
  double dfc_s = 0;
  void add_delta(const MmapCounts& a, const MmapCounts& b);  // += b - a (the switches: b's)
};
MmapCounts mmap_counts(Backend& b);

// The `expert_cache` object of a CPU run with experts on the mapped file: hit rate = resident
// expert matrices / looked-up ones, bytes from disk = the missing pages', GB/s = those bytes
// over the time stalled faulting them in; decode and prefill apart (measured repetitions);
// tokens: the decoded tokens of tg, decode_tps their rate.
nlohmann::json mmap_report(const MmapCounts& all, const MmapCounts& tg, const MmapCounts& pp, double tokens,
                           double decode_tps, double prefill_tokens);
// The decode part alone (a generation's counters tg over `tokens` tokens at decode_tps).
nlohmann::json mmap_decode_report(const MmapCounts& tg, double tokens, double decode_tps);

}  // namespace df::cli
