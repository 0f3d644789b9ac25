#include "server/metrics.h"

#include <sstream>

namespace df::server {

void HttpCounters::count(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(m_);
  ++n_[{endpoint, status}];
}

std::map<std::pair<std::string, int>, int64_t> HttpCounters::snapshot() const {
  std::lock_guard<std::mutex> lock(m_);
  return n_;
}

std::string prometheus_text(const HttpCounters& http, const SchedulerCounters& s) {
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o << "# HELP diskformer_" << name << ' ' << help << "\n# TYPE diskformer_" << name << ' ' << type << "\n"
      << "diskformer_" << name << ' ' << value << "\n";
  };
  o << "# HELP diskformer_http_requests_total HTTP requests answered, by endpoint and status\n"
       "# TYPE diskformer_http_requests_total counter\n";
  for (const auto& [key, n] : http.snapshot())
    o << "diskformer_http_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n
      << "\n";
  o << "# HELP diskformer_requests_finished_total generations ended, by reason\n"
       "# TYPE diskformer_requests_finished_total counter\n"
    << "diskformer_requests_finished_total{reason=\"stop\"} " << s.finished_stop << "\n"
    << "diskformer_requests_finished_total{reason=\"length\"} " << s.finished_length << "\n"
    << "diskformer_requests_finished_total{reason=\"cancelled\"} " << s.cancelled << "\n"
    << "diskformer_requests_finished_total{reason=\"error\"} " << s.failed << "\n";
  metric("requests_started_total", "counter", "generations admitted to a slot", s.started);
  metric("requests_active", "gauge", "generations in a slot now", s.active);
  metric("requests_queued", "gauge", "generations waiting for a free slot", s.queued);
  metric("slots", "gauge", "slots (--parallel)", s.n_slots);
  metric("prompt_tokens_total", "counter", "prompt tokens of admitted generations", s.prompt_tokens);
  metric("prompt_tokens_cached_total", "counter", "prompt tokens reused from a slot's cache", s.cached_tokens);
  metric("generated_tokens_total", "counter", "tokens generated", s.generated_tokens);
  metric("decode_steps_total", "counter", "decode steps (one token for every active slot)", s.steps);
  metric("decode_forwards_total", "counter", "decode forwards (a step with more slots than --step-rows runs several)",
         s.forwards);
  metric("decode_step_rows_total", "counter", "sequences advanced, summed over the decode steps", s.step_rows);
  metric("spec_cycles_total", "counter", "speculative (MTP) cycles of greedy slots decoding alone", s.spec_cycles);
  metric("spec_draft_tokens_total", "counter", "draft tokens the MTP head proposed", s.spec_drafted);
  metric("spec_draft_tokens_accepted_total", "counter", "of those, accepted by the verify", s.spec_accepted);
  metric("prefill_seconds_total", "counter", "time spent prefilling prompts", s.prefill_seconds);
  metric("decode_seconds_total", "counter", "time spent in decode steps", s.decode_seconds);
  metric("generated_tokens_per_second", "gauge", "tokens generated per second over the last 10 s",
         s.recent_tokens_per_second);
  return o.str();
}

}  // namespace df::server
