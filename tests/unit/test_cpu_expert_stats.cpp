// The CPU backend's expert stats (CpuOptions::expert_stats) on a random qwen35moe model whose
// routed experts stay on the GGUF's mapped pages (f32 stacks, --cpu-repack off):
//   - every decoded token looks up n_layer x n_used x 3 expert matrices, each a hit or a miss;
//   - the logits are the same bits with the stats on and off (also with the file's pages
//     evicted before the run: the stats fault the experts in themselves);
//   - after the file's pages are evicted, the next token misses, reads bytes from disk and
//     stalls on them (skipped where eviction drops nothing);
//   - `bench --device cpu --output json` reports them as `expert_cache` with source "mmap",
//     and not with --no-cpu-expert-stats.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/mapped_pages.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "model_fixture.h"
#include "page_cache_util.h"

namespace df {
namespace {

constexpr int64_t kLayers = 4, kUsed = 3;  // modeltest::kQwen35MoeArgs: --layers 4 --experts-used 3

std::unique_ptr<Engine> load(const std::string& path, bool stats) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  eo.cpu.repack = false;  // the expert stacks stay on the mapped file
  eo.cpu.expert_stats = stats;
  eo.n_ctx = 128;
  eo.prefill_chunk = 16;
  return Engine::load(eo);
}

cpu::CpuBackend& cpu_of(Engine& e) { return dynamic_cast<cpu::CpuBackend&>(e.backend()); }

std::vector<Token> ids(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % (vocab - 2) + 1);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Pages of the file's mapping not in the page cache.
int64_t missing_file_pages(const Engine& e) {
  std::vector<unsigned char> vec;
  return cpu::missing_pages(cpu::page_span(e.file().base(), e.file().file_size()), vec);
}

// Evicts the model file's pages. The mapping is advised MADV_RANDOM first: a page fault then
// reads its page alone, not the pages around it (the kernel's read-around would bring a small
// file's experts in with the first dense weight a forward touches, and they would count as hits).
void evict(const Engine& e) {
  ::madvise(const_cast<uint8_t*>(e.file().base()), e.file().file_size(), MADV_RANDOM);
  ASSERT_TRUE(testutil::evict_file_pages(e.file().path(), e.file().base(), e.file().file_size()));
}

TEST(CpuExpertStats, CountsEveryRoutedExpertMatrix) {
  auto e = load(modeltest::make_model("stats_moe", modeltest::kQwen35MoeArgs), true);
  ASSERT_EQ(e->info().n_layer, kLayers);
  const cpu::CpuBackend& b = cpu_of(*e);
  EXPECT_TRUE(b.expert_stats_on());
  EXPECT_EQ(b.expert_stats().mapped_stacks, static_cast<uint64_t>(kLayers * 3));  // gate, up, down per layer
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  Session s(*e);
  s.prefill(ids(13, 1, V));
  const cpu::ExpertStats a = b.expert_stats();
  EXPECT_GT(a.lookups, 0u) << "the prompt's experts";
  const int64_t n = 5;
  for (Token t : ids(n, 2, V)) s.decode(t);
  const cpu::ExpertStats z = b.expert_stats();
  EXPECT_EQ(z.lookups - a.lookups, static_cast<uint64_t>(n * kLayers * kUsed * 3));
  EXPECT_EQ(z.hits + z.misses, z.lookups);
  EXPECT_EQ(z.bytes_from_disk % cpu::page_size(), 0u);  // whole pages
  EXPECT_EQ(z.mapped_stacks, a.mapped_stacks);
}

TEST(CpuExpertStats, StatsOffCountNothing) {
  auto e = load(modeltest::make_model("stats_moe", modeltest::kQwen35MoeArgs), false);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  Session s(*e);
  s.prefill(ids(13, 1, V));
  s.decode(ids(1, 2, V)[0]);
  EXPECT_FALSE(cpu_of(*e).expert_stats_on());
  EXPECT_EQ(cpu_of(*e).expert_stats().lookups, 0u);
}

// Prompt logits and 6 decoded tokens' logits, the file's pages evicted first (when `cold`);
// misses: the expert matrices the stats found missing.
std::vector<std::vector<float>> run_logits(const std::string& path, bool stats, bool cold, uint64_t* misses = nullptr) {
  auto e = load(path, stats);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  if (cold) evict(*e);
  std::vector<std::vector<float>> out;
  Session s(*e);
  out.push_back(s.prefill(ids(21, 3, V)));
  for (Token t : ids(6, 4, V)) out.push_back(s.decode(t));
  if (misses) *misses = cpu_of(*e).expert_stats().misses;
  return out;
}

TEST(CpuExpertStats, SameBitsWithStatsOnAndOff) {
  const std::string path = modeltest::make_model("stats_moe", modeltest::kQwen35MoeArgs);
  const auto off = run_logits(path, false, false);
  for (bool cold : {false, true}) {
    uint64_t misses = 0;
    const auto on = run_logits(path, true, cold, &misses);
    if (cold) std::printf("cold run: %llu expert matrices faulted in by the stats\n", static_cast<unsigned long long>(misses));
    ASSERT_EQ(on.size(), off.size());
    for (size_t i = 0; i < on.size(); ++i) EXPECT_TRUE(same_bits(off[i], on[i])) << "row " << i << (cold ? " (cold)" : "");
  }
}

TEST(CpuExpertStats, EvictedExpertsAreReadFromDisk) {
  auto e = load(modeltest::make_model("stats_moe", modeltest::kQwen35MoeArgs), true);
  const cpu::CpuBackend& b = cpu_of(*e);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  Session s(*e);
  s.prefill(ids(13, 1, V));
  s.decode(ids(1, 5, V)[0]);
  evict(*e);
  const int64_t missing = missing_file_pages(*e);
  if (missing == 0) GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) evicted no page of the model";
  const cpu::ExpertStats a = b.expert_stats();
  s.decode(ids(1, 6, V)[0]);
  const cpu::ExpertStats z = b.expert_stats();
  EXPECT_EQ(z.lookups - a.lookups, static_cast<uint64_t>(kLayers * kUsed * 3));
  EXPECT_GT(z.misses, a.misses) << missing << " pages of the file missing before the token";
  EXPECT_GT(z.bytes_from_disk, a.bytes_from_disk);
  EXPECT_GT(z.stall_seconds, a.stall_seconds);
  EXPECT_EQ(z.hits + z.misses, z.lookups);
  EXPECT_EQ(z.bytes_from_disk % cpu::page_size(), 0u);  // whole pages
}

TEST(CpuExpertStats, BenchReportsMappedExperts) {
  const std::string path = modeltest::make_model("stats_moe", modeltest::kQwen35MoeArgs);
  const std::string cmd = std::string(DF_CLI) + " bench -m " + path +
                          " --device cpu -t 2 --cpu-repack off -p 8 -n 4 -r 1 --output json -q";
  const auto j = nlohmann::json::parse(testutil::run(cmd + " 2>/dev/null </dev/null"), nullptr, false);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j.contains("expert_cache"));
  const auto& c = j["expert_cache"];
  EXPECT_EQ(c["source"], "mmap");
  EXPECT_EQ(c["mapped_stacks"].get<int64_t>(), kLayers * 3);
  EXPECT_EQ(c["decode_lookups"].get<int64_t>(), 4 * kLayers * kUsed * 3);
  EXPECT_DOUBLE_EQ(c["decode_lookups_per_token"].get<double>(), static_cast<double>(kLayers * kUsed * 3));
  EXPECT_EQ(c["decode_hits"].get<int64_t>() + c["decode_misses"].get<int64_t>(), c["decode_lookups"].get<int64_t>());
  EXPECT_GT(c["prefill_lookups"].get<int64_t>(), 0);
  for (const char* k : {"decode_hit_rate", "decode_bytes_from_disk_per_token", "decode_disk_gb_per_second",
                        "decode_stall_ms_per_token", "decode_stall_share"})
    EXPECT_TRUE(c.contains(k)) << k;
  const auto off = nlohmann::json::parse(testutil::run(cmd + " --no-cpu-expert-stats 2>/dev/null </dev/null"), nullptr, false);
  ASSERT_TRUE(off.is_object());
  EXPECT_FALSE(off.contains("expert_cache"));
}

}  // namespace
}  // namespace df
