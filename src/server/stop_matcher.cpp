#include "server/stop_matcher.h"

#include <algorithm>

namespace df::server {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  // Earliest occurrence of any stop string; on equal starts the longest string wins.
  size_t best = std::string::npos;
  for (const std::string& s : stops_) {
    const size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > matched_.size())) {
      best = at;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest tail of held_ that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t most = std::min(s.size() - 1, held_.size());
    for (size_t k = most; k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace df::server
