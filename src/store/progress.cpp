#include "store/progress.h"

#include <algorithm>
#include <cstdio>

#include "store/file_io.h"

namespace df::store {

namespace {
std::string duration(double s) {
  if (!(s >= 0) || s > 99 * 3600) return "--:--";
  const auto t = static_cast<long>(s + 0.5);
  char b[32];
  if (t >= 3600)
    std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}
}  // namespace

std::string progress_line(const std::string& label, const Progress& p, int width) {
  const double frac = p.total ? std::min(1.0, static_cast<double>(p.done) / static_cast<double>(p.total)) : 0.0;
  const double rate = p.seconds > 0 ? static_cast<double>(p.transferred) / p.seconds : 0.0;
  std::string s = label + " [";
  const int filled = p.total ? static_cast<int>(frac * width + 0.5) : 0;
  s += std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.') + "]";
  char b[64];
  if (p.total) {
    std::snprintf(b, sizeof b, " %3d%%", static_cast<int>(frac * 100));
    s += b;
  }
  s += "  " + human_bytes(static_cast<double>(p.done));
  if (p.total) s += " / " + human_bytes(static_cast<double>(p.total));
  s += "  " + human_bytes(rate) + "/s";
  if (p.finished)
    s += "  in " + duration(p.seconds);
  else if (p.total)
    s += "  ETA " + (rate > 0 ? duration(static_cast<double>(p.total - std::min(p.done, p.total)) / rate) : "--:--");
  return s;
}

}  // namespace df::store
