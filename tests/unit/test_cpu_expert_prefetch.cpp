// The CPU backend's expert prefetch (CpuOptions::expert_prefetch):
//   - once routed (Backend::moe_experts_routed), the pages advised are exactly the missing
//     pages of the used experts (all rows) of the three stacks: every one after the file's
//     pages are evicted, none when all are resident, none with the prefetch off; with the
//     stats on, the stats count the same check (every used expert a lookup, every page from
//     disk) and matmul_id does not count them again;
//   - the logits are the same bits with the prefetch on and off, the stats on and off, with
//     the file's pages resident or evicted;
//   - with the stats off, a cold decode advises pages (the prefetch runs without the stats).
// The forecast (CpuOptions::expert_forecast, Backend::moe_forecast):
//   - the router over rms_norm(x) picks each row's top experts; the missing pages of those
//     (all three stacks) are queued for the advisor's thread, none when resident; the routing
//     then counts how many of its experts were forecast (recall / precision counters);
//   - on a random qwen35moe model the logits are the same bits with it on and off, and it
//     forecasts (and, cold, queues pages) at every MoE layer.
// PageAdvisor: the spans queued are advised by its thread, all of them by drain().
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/mapped_pages.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "model_fixture.h"
#include "page_cache_util.h"
#include "test_util.h"

namespace df {
namespace {

using cpu::page_size;

// A file of `bytes` bytes (byte i = i * 13), mapped read-only.
struct MappedFile {
  std::string path;
  int fd = -1;
  uint8_t* map = nullptr;
  size_t bytes = 0;
  MappedFile(const std::string& p, size_t n) : path(p), bytes(n) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 13);
    testutil::write_file(path, data);
    fd = ::open(path.c_str(), O_RDONLY);
    void* m = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (m != MAP_FAILED) map = static_cast<uint8_t*>(m);
  }
  ~MappedFile() {
    if (map) ::munmap(map, bytes);
    if (fd >= 0) ::close(fd);
  }
  // Evicts the file's pages; a later touch reads its page alone (MADV_RANDOM). False: some
  // page stayed resident (eviction not available here).
  bool evict() {
    ::madvise(map, bytes, MADV_RANDOM);
    if (!testutil::evict_file_pages(path, map, bytes)) return false;
    std::vector<unsigned char> vec;
    const cpu::PageSpan all = cpu::page_span(map, bytes);
    return cpu::missing_pages(all, vec) == all.pages;
  }
};

// Three f32 stacks of 16 experts [rows 40, cols 96] (15360 bytes each: experts share pages)
// at 32-byte-aligned offsets of a mapped file, routed by 2 rows of 3 slots.
struct Fixture {
  static constexpr int64_t kExperts = 16, kRows = 40, kCols = 96, kUsed = 3;
  MappedFile f;
  cpu::CpuBackend b;
  MoeExperts m;
  std::vector<int32_t> ids = {9, 2, 3, 3, 14, 2};  // experts 2, 3, 9, 14
  size_t expert_bytes = kRows * kCols * sizeof(float);
  size_t offs[3] = {4096 + 96, 4096 + 96 + 16 * 15360 + 32, 4096 + 96 + 2 * 16 * 15360 + 64};
  explicit Fixture(bool stats, bool prefetch, bool forecast = false)
      : f(testutil::test_dir(DF_UNIT_WORK_DIR) + "/prefetch.bin", 4096 + 3 * 16 * 15360 + 8192),
        b(cpu::CpuOptions{.threads = 1, .repack = false, .expert_stats = stats, .expert_prefetch = prefetch,
                          .expert_forecast = forecast}) {
    b.weight_file(f.path, f.map, f.bytes);
    Tensor* stacks[3] = {&m.gate_exps, &m.up_exps, &m.down_exps};
    for (int s = 0; s < 3; ++s) *stacks[s] = b.weight_stack(GgmlType::F32, kCols, kRows, kExperts, f.map + offs[s]);
    m.n_expert = kExperts;
    m.ids.data = ids.data();
    m.ids.type = GgmlType::I32;
    m.ids.rows = 2, m.ids.cols = kUsed, m.ids.stride = kUsed * sizeof(int32_t);
  }
  // The pages holding a byte of a used expert of any stack (page-by-page brute force).
  std::set<uintptr_t> used_pages() const { return pages_of(ids); }
  std::set<uintptr_t> pages_of(const std::vector<int32_t>& experts) const {
    std::set<uintptr_t> out;
    for (const size_t o : offs)
      for (const int32_t e : experts) {
        const uintptr_t a = reinterpret_cast<uintptr_t>(f.map + o + expert_bytes * static_cast<size_t>(e));
        for (uintptr_t p = a / page_size(); p <= (a + expert_bytes - 1) / page_size(); ++p) out.insert(p);
      }
    return out;
  }
};

TEST(CpuExpertPrefetch, AdvisesExactlyTheRoutedExpertsMissingPages) {
  Fixture x(false, true);
  ASSERT_NE(x.f.map, nullptr);
  ASSERT_TRUE(x.b.expert_prefetch_on());
  if (!x.f.evict()) GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) did not evict the whole file here";
  const auto want = x.used_pages();
  x.b.moe_experts_routed(x.m);
  EXPECT_EQ(x.b.expert_prefetch_pages(), want.size()) << "every page of the 4 used experts x 3 stacks, once";
  // all resident now: nothing more is advised
  cpu::touch_pages(cpu::page_span(x.f.map, x.f.bytes));
  x.b.moe_experts_routed(x.m);
  EXPECT_EQ(x.b.expert_prefetch_pages(), want.size());
  EXPECT_EQ(x.b.expert_stats().lookups, 0u) << "stats off";
}

TEST(CpuExpertPrefetch, StatsCountTheCheckOnce) {
  Fixture x(true, true);
  ASSERT_NE(x.f.map, nullptr);
  if (!x.f.evict()) GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) did not evict the whole file here";
  const auto want = x.used_pages();
  x.b.moe_experts_routed(x.m);
  EXPECT_EQ(x.b.expert_prefetch_pages(), want.size());
  const cpu::ExpertStats s = x.b.expert_stats();
  EXPECT_EQ(s.lookups, 3u * 4u);  // 4 used experts x 3 stacks
  EXPECT_EQ(s.misses, 3u * 4u);
  // each page once (a page shared by two used experts of a stack counts with the first; the
  // stacks' boundary pages hold no used expert here)
  EXPECT_EQ(s.bytes_from_disk, want.size() * page_size());
  // the products after it: the same lookups, not counted again
  std::vector<float> xin(2 * Fixture::kCols, 0.5f), y(2 * Fixture::kUsed * Fixture::kRows);
  Tensor xt{xin.data(), GgmlType::F32, Fixture::kCols, 2, Fixture::kCols * sizeof(float)};
  Tensor yt{y.data(), GgmlType::F32, Fixture::kRows, 2 * Fixture::kUsed, Fixture::kRows * sizeof(float)};
  x.b.matmul_id(x.m.up_exps, Fixture::kExperts, xt, x.m.ids, yt);
  x.b.matmul_id(x.m.gate_exps, Fixture::kExperts, xt, x.m.ids, yt);
  EXPECT_EQ(x.b.expert_stats().lookups, s.lookups);
  EXPECT_GT(x.b.expert_stats().stall_seconds, s.stall_seconds) << "the product waited for its advised pages";
  // the down stack's products were never run: a new routing forgets them, and the next product
  // of a stack checks as usual
  x.b.moe_experts_routed(MoeExperts{});
  x.b.matmul_id(x.m.down_exps, Fixture::kExperts, xt, x.m.ids, yt);
  EXPECT_EQ(x.b.expert_stats().lookups, s.lookups + 4u);
}

TEST(CpuExpertPrefetch, OffAdvisesNothing) {
  Fixture x(false, false);
  ASSERT_NE(x.f.map, nullptr);
  EXPECT_FALSE(x.b.expert_prefetch_on());
  x.f.evict();
  x.b.moe_experts_routed(x.m);
  EXPECT_EQ(x.b.expert_prefetch_pages(), 0u);
}

// ---- a random qwen35moe model (f32 stacks on the mapped file: --cpu-repack off) ----

std::unique_ptr<Engine> load(const std::string& path, bool stats, bool prefetch, bool forecast = false) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  eo.cpu.repack = false;
  eo.cpu.expert_stats = stats;
  eo.cpu.expert_prefetch = prefetch;
  eo.cpu.expert_forecast = forecast;
  eo.n_ctx = 128;
  eo.prefill_chunk = 16;
  return Engine::load(eo);
}

std::vector<Token> ids(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % (vocab - 2) + 1);
  return v;
}

// Prompt logits and 6 decoded tokens' logits, the file's pages evicted first when `cold`;
// advised: the pages the prefetch advised; evicted: whether eviction left pages missing;
// forecast: CpuOptions::expert_forecast, with the backend's stats after the run in *st.
std::vector<std::vector<float>> run_logits(const std::string& path, bool stats, bool prefetch, bool cold,
                                           uint64_t* advised, bool* evicted = nullptr, bool forecast = false,
                                           cpu::ExpertStats* st = nullptr) {
  auto e = load(path, stats, prefetch, forecast);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  if (cold) {
    ::madvise(const_cast<uint8_t*>(e->file().base()), e->file().file_size(), MADV_RANDOM);
    EXPECT_TRUE(testutil::evict_file_pages(e->file().path(), e->file().base(), e->file().file_size()));
    std::vector<unsigned char> vec;
    if (evicted) *evicted = cpu::missing_pages(cpu::page_span(e->file().base(), e->file().file_size()), vec) > 0;
  }
  std::vector<std::vector<float>> out;
  Session s(*e);
  out.push_back(s.prefill(ids(21, 3, V)));
  for (Token t : ids(6, 4, V)) out.push_back(s.decode(t));
  *advised = dynamic_cast<cpu::CpuBackend&>(e->backend()).expert_prefetch_pages();
  if (st) *st = dynamic_cast<cpu::CpuBackend&>(e->backend()).expert_stats();
  return out;
}

TEST(CpuExpertPrefetch, SameBitsWithPrefetchOnAndOff) {
  const std::string path = modeltest::make_model("prefetch_moe", modeltest::kQwen35MoeArgs);
  uint64_t advised = 0;
  const auto ref = run_logits(path, false, false, false, &advised);
  EXPECT_EQ(advised, 0u);
  for (bool cold : {false, true})
    for (bool stats : {false, true})
      for (bool prefetch : {false, true}) {
        bool evicted = false;
        const auto got = run_logits(path, stats, prefetch, cold, &advised, &evicted);
        if (!prefetch) {
          EXPECT_EQ(advised, 0u);
        }
        if (prefetch && evicted) {
          EXPECT_GT(advised, 0u) << "stats " << stats << ": the routing's missing experts advised";
        }
        if (prefetch && cold)
          std::printf("cold run, stats %s: %llu pages advised\n", stats ? "on" : "off", static_cast<unsigned long long>(advised));
        ASSERT_EQ(got.size(), ref.size());
        for (size_t i = 0; i < got.size(); ++i)
          EXPECT_EQ(std::memcmp(got[i].data(), ref[i].data(), ref[i].size() * sizeof(float)), 0)
              << "row " << i << " stats " << stats << " prefetch " << prefetch << " cold " << cold;
      }
}

// A forecast over the fixture's stacks: a one-hot router (row e picks column e of x), so each
// row's top experts are its largest x columns: row 0 -> {5, 2, 11}, row 1 -> {5, 7, 0}.
struct ForecastInput {
  std::vector<float> router, norm, x, xn, logits;
  MoeForecast f;
  explicit ForecastInput(const Fixture& fx) {
    constexpr int64_t E = Fixture::kExperts, C = Fixture::kCols;
    router.assign(E * C, 0.0f);
    for (int64_t e = 0; e < E; ++e) router[static_cast<size_t>(e * C + e)] = 1.0f;
    norm.assign(C, 1.0f);
    x.assign(2 * C, 0.01f);
    x[5] = 9, x[2] = 8, x[11] = 7;
    x[C + 5] = 9, x[C + 7] = 8, x[C + 0] = 7;
    xn.assign(2 * C, 0.0f);
    logits.assign(2 * E, 0.0f);
    f.gate_exps = fx.m.gate_exps, f.up_exps = fx.m.up_exps, f.down_exps = fx.m.down_exps;
    f.n_expert = E, f.n_used = Fixture::kUsed;
    f.router = Tensor{router.data(), GgmlType::F32, C, E, C * sizeof(float)};
    f.norm = Tensor{norm.data(), GgmlType::F32, C, 1, C * sizeof(float)};
    f.eps = 1e-6f;
    f.x = Tensor{x.data(), GgmlType::F32, C, 2, C * sizeof(float)};
    f.xn = Tensor{xn.data(), GgmlType::F32, C, 2, C * sizeof(float)};
    f.logits = Tensor{logits.data(), GgmlType::F32, E, 2, E * sizeof(float)};
  }
};

TEST(CpuExpertForecast, QueuesThePredictedExpertsAndCountsTheirRecall) {
  Fixture x(true, true, true);
  ASSERT_NE(x.f.map, nullptr);
  ASSERT_TRUE(x.b.expert_forecast_on());
  if (!x.f.evict()) GTEST_SKIP() << "posix_fadvise(POSIX_FADV_DONTNEED) did not evict the whole file here";
  ForecastInput in(x);
  x.b.moe_forecast(in.f);
  const std::vector<int32_t> predicted = {0, 2, 5, 7, 11};
  cpu::ExpertStats s = x.b.expert_stats();
  EXPECT_EQ(s.forecast_experts, predicted.size());
  EXPECT_EQ(s.forecast_pages, x.pages_of(predicted).size()) << "every page of the 5 predicted experts x 3 stacks";
  EXPECT_EQ(s.lookups, 0u) << "a forecast is not a lookup";
  // the routing (experts 2, 3, 9, 14): one of its four was forecast
  x.b.moe_experts_routed(x.m);
  s = x.b.expert_stats();
  EXPECT_EQ(s.forecast_routed, 4u);
  EXPECT_EQ(s.forecast_hits, 1u);
  // a routing without a forecast before it adds nothing to the forecast counters
  x.b.moe_experts_routed(x.m);
  EXPECT_EQ(x.b.expert_stats().forecast_routed, 4u);
  // resident: a forecast queues no page
  cpu::touch_pages(cpu::page_span(x.f.map, x.f.bytes));
  x.b.moe_forecast(in.f);
  EXPECT_EQ(x.b.expert_stats().forecast_pages, s.forecast_pages);
  EXPECT_EQ(x.b.expert_stats().forecast_experts, 2 * predicted.size());
}

TEST(CpuExpertForecast, OffDoesNothing) {
  Fixture x(true, true, false);
  ASSERT_NE(x.f.map, nullptr);
  EXPECT_FALSE(x.b.expert_forecast_on());
  ForecastInput in(x);
  x.b.moe_forecast(in.f);
  x.b.moe_experts_routed(x.m);
  const cpu::ExpertStats s = x.b.expert_stats();
  EXPECT_EQ(s.forecast_experts + s.forecast_routed + s.forecast_hits + s.forecast_pages, 0u);
  EXPECT_EQ(in.logits, std::vector<float>(in.logits.size(), 0.0f)) << "no router product";
}

TEST(CpuExpertForecast, SameBitsAndForecastsEveryMoeLayer) {
  const std::string path = modeltest::make_model("forecast_moe", modeltest::kQwen35MoeArgs);
  std::vector<std::vector<float>> ref;
  for (bool forecast : {false, true})
    for (bool cold : {false, true}) {
      uint64_t advised = 0;
      bool evicted = false;
      cpu::ExpertStats st;
      const auto got = run_logits(path, true, true, cold, &advised, &evicted, forecast, &st);
      if (!forecast) {
        EXPECT_EQ(st.forecast_experts, 0u);
        if (!cold) ref = got;
      } else {
        // 4 MoE layers x (2 prefill chunks + 6 decode steps), each forecast then routed
        EXPECT_GT(st.forecast_experts, 0u);
        EXPECT_GE(st.forecast_routed, 4u * 8u * 3u);
        EXPECT_LE(st.forecast_hits, st.forecast_routed);
        EXPECT_GT(st.forecast_hits, 0u);
        if (evicted) {
          EXPECT_GT(st.forecast_pages, 0u) << "cold: the first forecasts find missing pages";
        }
        std::printf("forecast %s: recall %.3f precision %.3f, %llu pages queued\n", cold ? "cold" : "warm",
                    static_cast<double>(st.forecast_hits) / static_cast<double>(st.forecast_routed),
                    static_cast<double>(st.forecast_hits) / static_cast<double>(st.forecast_experts),
                    static_cast<unsigned long long>(st.forecast_pages));
      }
      ASSERT_EQ(got.size(), ref.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(std::memcmp(got[i].data(), ref[i].data(), ref[i].size() * sizeof(float)), 0)
            << "row " << i << " forecast " << forecast << " cold " << cold;
    }
}

TEST(PageAdvisor, AdvisesEverySpanQueued) {
  MappedFile f(testutil::test_dir(DF_UNIT_WORK_DIR) + "/advisor.bin", 64 * page_size());
  ASSERT_NE(f.map, nullptr);
  cpu::PageAdvisor a;
  std::vector<cpu::PageSpan> spans;
  for (int i = 0; i < 8; ++i) spans.push_back(cpu::page_span(f.map + (8 * i + 1) * page_size(), 3 * page_size()));
  a.advise(std::span<const cpu::PageSpan>(spans).first(3));
  a.advise(std::span<const cpu::PageSpan>(spans).subspan(3));
  a.drain();
  EXPECT_EQ(a.pages_advised(), 8u * 3u);
  a.advise({});
  a.drain();
  EXPECT_EQ(a.pages_advised(), 8u * 3u);
}

}  // namespace
}  // namespace df
