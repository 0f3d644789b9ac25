// Transfer progress: what a download reports, and the one-line bar the CLI draws from it.
#pragma once
#include <cstdint>
#include <string>

namespace df::store {

struct Progress {
  uint64_t done = 0;         // bytes of the target present (resumed ones included)
  uint64_t total = 0;        // 0: unknown
  uint64_t transferred = 0;  // bytes received by this process
  double seconds = 0;        // since this process started the transfer
  bool finished = false;
};

// "name [#########.........]  45%  1.9 GiB / 4.0 GiB  35.2 MiB/s  ETA 1:02"
std::string progress_line(const std::string& label, const Progress& p, int width = 24);

}  // namespace df::store
