#include "bench_mmap.h"

#include "backend/cpu/cpu_backend.h"

namespace df::cli {

void MmapCounts::add_delta(const MmapCounts& a, const MmapCounts& b) {
  on = b.on, prefetch = b.prefetch, forecast = b.forecast, draft_forecast = b.draft_forecast, stacks = b.stacks;
  lookups += b.lookups - a.lookups, hits += b.hits - a.hits, misses += b.misses - a.misses;
  advised += b.advised - a.advised;
  fc_experts += b.fc_experts - a.fc_experts, fc_routed += b.fc_routed - a.fc_routed, fc_hits += b.fc_hits - a.fc_hits;
  fc_bytes += b.fc_bytes - a.fc_bytes, fc_s += b.fc_s - a.fc_s;
  dfc_n += b.dfc_n - a.dfc_n, dfc_experts += b.dfc_experts - a.dfc_experts;
  dfc_routed += b.dfc_routed - a.dfc_routed, dfc_hits += b.dfc_hits - a.dfc_hits;
  dfc_bytes += b.dfc_bytes - a.dfc_bytes, dfc_s += b.dfc_s - a.dfc_s;
  bytes += b.bytes - a.bytes, stall_s += b.stall_s - a.stall_s, check_s += b.check_s - a.check_s;
}

MmapCounts mmap_counts(Backend& b) {
  MmapCounts c;
  if (auto* p = dynamic_cast<cpu::CpuBackend*>(&b)) {
    const cpu::ExpertStats& s = p->expert_stats();
    c.on = p->expert_stats_on() && s.mapped_stacks > 0;
    c.stacks = s.mapped_stacks, c.lookups = s.lookups, c.hits = s.hits, c.misses = s.misses;
    c.bytes = s.bytes_from_disk, c.stall_s = s.stall_seconds, c.check_s = s.check_seconds;
    c.prefetch = p->expert_prefetch_on(), c.advised = p->expert_prefetch_pages() * cpu::page_size();
    c.forecast = p->expert_forecast_on();
    c.fc_experts = s.forecast_experts, c.fc_routed = s.forecast_routed, c.fc_hits = s.forecast_hits;
    c.fc_bytes = s.forecast_pages * cpu::page_size(), c.fc_s = s.forecast_seconds;
    c.draft_forecast = p->expert_draft_forecast_on();
    c.dfc_n = s.draft_forecasts, c.dfc_experts = s.draft_forecast_experts, c.dfc_routed = s.draft_forecast_routed;
    c.dfc_hits = s.draft_forecast_hits, c.dfc_bytes = s.draft_forecast_pages * cpu::page_size();
    c.dfc_s = s.draft_forecast_seconds;
  }
  return c;
}

namespace {

double ratio(uint64_t a, uint64_t b) { return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0; }
double per(double a, double tokens) { return tokens > 0 ? a / tokens : 0.0; }

}  // namespace

nlohmann::json mmap_decode_report(const MmapCounts& tg, double tokens, double decode_tps) {
  const double sec = decode_tps > 0 && tokens > 0 ? tokens / decode_tps : 0.0;
  return {{"decode_lookups", tg.lookups},
          {"decode_hits", tg.hits},
          {"decode_misses", tg.misses},
          {"decode_hit_rate", ratio(tg.hits, tg.lookups)},
          {"decode_lookups_per_token", per(static_cast<double>(tg.lookups), tokens)},
          {"decode_bytes_from_disk_per_token", per(static_cast<double>(tg.bytes), tokens)},
          {"decode_disk_gb_per_second", tg.stall_s > 0 ? static_cast<double>(tg.bytes) / tg.stall_s / 1e9 : 0.0},
          {"decode_stall_ms_per_token", per(1000.0 * tg.stall_s, tokens)},
          {"decode_stall_share", sec > 0 ? tg.stall_s / sec : 0.0},
          // the stats' own cost: the residency checks (mincore), per token and as a share of decode
          {"decode_check_ms_per_token", per(1000.0 * tg.check_s, tokens)},
          {"decode_check_share", sec > 0 ? tg.check_s / sec : 0.0},
          // the prefetch's MADV_WILLNEED: the missing pages it asked for once the routing was known
          {"decode_advised_bytes_per_token", per(static_cast<double>(tg.advised), tokens)},
          // the forecast (--cpu-expert-forecast): recall = routed experts it had predicted / routed
          // ones, precision = those / predicted ones; its advised bytes and its own time per token
          {"forecast", tg.forecast},
          {"decode_forecast_recall", ratio(tg.fc_hits, tg.fc_routed)},
          {"decode_forecast_precision", ratio(tg.fc_hits, tg.fc_experts)},
          {"decode_forecast_advised_bytes_per_token", per(static_cast<double>(tg.fc_bytes), tokens)},
          {"decode_forecast_ms_per_token", per(1000.0 * tg.fc_s, tokens)},
          // the forecast from the drafts (--cpu-expert-draft-forecast, speculative decoding): the
          // same figures over the verifies' routings
          {"draft_forecast", tg.draft_forecast},
          {"decode_draft_forecasts", tg.dfc_n},
          {"decode_draft_forecast_recall", ratio(tg.dfc_hits, tg.dfc_routed)},
          {"decode_draft_forecast_precision", ratio(tg.dfc_hits, tg.dfc_experts)},
          {"decode_draft_forecast_advised_bytes_per_token", per(static_cast<double>(tg.dfc_bytes), tokens)},
          {"decode_draft_forecast_ms_per_token", per(1000.0 * tg.dfc_s, tokens)}};
}

nlohmann::json mmap_report(const MmapCounts& all, const MmapCounts& tg, const MmapCounts& pp, double tokens,
                           double decode_tps, double prefill_tokens) {
  nlohmann::json j = {{"source", "mmap"},
                      {"prefetch", all.prefetch},
                      {"mapped_stacks", all.stacks},
                      {"all_lookups", all.lookups},
                      {"all_hits", all.hits},
                      {"all_misses", all.misses},
                      {"all_bytes_from_disk", all.bytes},
                      {"all_stall_seconds", all.stall_s},
                      {"all_check_seconds", all.check_s},
                      {"prefill_lookups", pp.lookups},
                      {"prefill_hits", pp.hits},
                      {"prefill_misses", pp.misses},
                      {"prefill_hit_rate", ratio(pp.hits, pp.lookups)},
                      {"prefill_bytes_from_disk_per_token", per(static_cast<double>(pp.bytes), prefill_tokens)},
                      {"prefill_disk_gb_per_second", pp.stall_s > 0 ? static_cast<double>(pp.bytes) / pp.stall_s / 1e9 : 0.0},
                      {"prefill_stall_seconds", pp.stall_s}};
  j.update(mmap_decode_report(tg, tokens, decode_tps));
  j["forecast"] = all.forecast;
  j["draft_forecast"] = all.draft_forecast;
  return j;
}

}  // namespace df::cli
