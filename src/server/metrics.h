// /metrics: Prometheus text exposition of the HTTP requests answered and the scheduler's
// counters (tokens in and out, throughput, active and queued requests).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "server/scheduler.h"

namespace df::server {

class HttpCounters {
 public:
  void count(const std::string& endpoint, int status);
  std::map<std::pair<std::string, int>, int64_t> snapshot() const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, int>, int64_t> n_;  // (endpoint, status) -> requests
};

std::string prometheus_text(const HttpCounters& http, const SchedulerCounters& s);

}  // namespace df::server
