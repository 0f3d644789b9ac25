// CpuBackend::prefault_weights: the engine's read of every page after load happens only while
// the files named by weight_file() fit in the memory available (/proc/meminfo MemAvailable); a
// model larger than that is left to fault in as the forward touches it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace df {
namespace {

TEST(CpuPrefault, OnlyFilesThatFitInAvailableMemory) {
  const uint64_t avail = cpu::available_memory();
  if (avail == 0) GTEST_SKIP() << "no MemAvailable in /proc/meminfo: prefault stays on";
  cpu::CpuOptions o;
  o.threads = 1;
  cpu::CpuBackend b(o);
  EXPECT_TRUE(b.prefault_weights());  // no files
  std::vector<uint8_t> small(1 << 20);
  b.weight_file("small.gguf", small.data(), small.size());
  EXPECT_TRUE(b.prefault_weights());
  // a second "file" (only its range is recorded; nothing is read) of twice the available memory,
  // at addresses past the first (no overlap: both stay recorded)
  const auto* far = small.data() + small.size() + 4096;
  b.weight_file("large.gguf", far, 2 * avail);
  EXPECT_FALSE(b.prefault_weights());
  // the same addresses named again by a new load replace the older mapping: small again
  b.weight_file("reloaded.gguf", far, 4096);
  EXPECT_TRUE(b.prefault_weights());
}

}  // namespace
}  // namespace df
