// The routing forecast from the drafts (CpuOptions::expert_draft_forecast, MoeForecast::draft,
// Model::forecast_experts), issue 14's "the drafts say which experts the verify batch will
// route to":
//   - the backend keeps a draft forecast apart from the layer forecast (its own counters,
//     compared with the next routing of the same block), queues the missing pages of its
//     experts, and does nothing with the option off (nor for the other kind);
//   - Qwen35's forecast_experts predicts from the rows' token embeddings with each block's
//     norm and router: on a one-layer model, where the layer forecast's input is those
//     embeddings too, both forecasts of a forward predict the same experts;
//   - speculative decoding with it on (greedy and sampling, pages resident and evicted) emits
//     the tokens it emits with it off (greedy: plain decoding's), and forecasts every MoE layer
//     of every verify once.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/mapped_pages.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "model_fixture.h"
#include "page_cache_util.h"
#include "spec/mtp_generator.h"
#include "test_util.h"

namespace df {
namespace {

// Three f32 stacks of 16 experts [40, 96] on a mapped file and a one-hot router: row e of the
// router picks column e of x, so a row's top experts are its largest columns.
struct Stacks {
  static constexpr int64_t kExperts = 16, kRows = 40, kCols = 96, kUsed = 3;
  std::string path;
  int fd = -1;
  uint8_t* map = nullptr;
  size_t bytes = 4096 + 3 * 16 * 15360 + 8192;
  cpu::CpuBackend b;
  std::vector<float> router, norm, x, xn, logits;
  MoeForecast f;
  MoeExperts m;
  std::vector<int32_t> ids = {9, 2, 3, 3, 14, 2};  // the routing: experts 2, 3, 9, 14
  Stacks(bool layer_forecast, bool draft_forecast)
      : path(testutil::test_dir(DF_UNIT_WORK_DIR) + "/draft_forecast.bin"),
        b(cpu::CpuOptions{.threads = 1, .repack = false, .expert_stats = true, .expert_prefetch = true,
                          .expert_forecast = layer_forecast, .expert_draft_forecast = draft_forecast}) {
    std::string data(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 7);
    testutil::write_file(path, data);
    fd = ::open(path.c_str(), O_RDONLY);
    void* p = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (p != MAP_FAILED) map = static_cast<uint8_t*>(p);
    if (!map) return;
    b.weight_file(path, map, bytes);
    Tensor* stacks[3] = {&m.gate_exps, &m.up_exps, &m.down_exps};
    for (int s = 0; s < 3; ++s)
      *stacks[s] = b.weight_stack(GgmlType::F32, kCols, kRows, kExperts, map + 4096 + s * (16 * 15360 + 32));
    m.n_expert = kExperts;
    m.ids = Tensor{ids.data(), GgmlType::I32, kUsed, 2, kUsed * sizeof(int32_t)};
    router.assign(kExperts * kCols, 0.0f);
    for (int64_t e = 0; e < kExperts; ++e) router[static_cast<size_t>(e * kCols + e)] = 1.0f;
    norm.assign(kCols, 1.0f);
    x.assign(2 * kCols, 0.01f);
    x[5] = 9, x[2] = 8, x[11] = 7;                       // row 0 -> {5, 2, 11}
    x[kCols + 5] = 9, x[kCols + 7] = 8, x[kCols + 0] = 7;  // row 1 -> {5, 7, 0}
    xn.assign(2 * kCols, 0.0f);
    logits.assign(2 * kExperts, 0.0f);
    f.gate_exps = m.gate_exps, f.up_exps = m.up_exps, f.down_exps = m.down_exps;
    f.n_expert = kExperts, f.n_used = kUsed;
    f.router = Tensor{router.data(), GgmlType::F32, kCols, kExperts, kCols * sizeof(float)};
    f.norm = Tensor{norm.data(), GgmlType::F32, kCols, 1, kCols * sizeof(float)};
    f.eps = 1e-6f;
    f.x = Tensor{x.data(), GgmlType::F32, kCols, 2, kCols * sizeof(float)};
    f.xn = Tensor{xn.data(), GgmlType::F32, kCols, 2, kCols * sizeof(float)};
    f.logits = Tensor{logits.data(), GgmlType::F32, kExperts, 2, kExperts * sizeof(float)};
  }
  ~Stacks() {
    if (map) ::munmap(map, bytes);
    if (fd >= 0) ::close(fd);
  }
  bool evict() {
    ::madvise(map, bytes, MADV_RANDOM);
    return testutil::evict_file_pages(path, map, bytes);
  }
};

TEST(CpuExpertDraftForecast, KeptApartFromTheLayerForecast) {
  Stacks s(true, true);
  ASSERT_NE(s.map, nullptr);
  EXPECT_TRUE(s.b.wants_moe_forecast(true));
  EXPECT_TRUE(s.b.wants_moe_forecast(false));
  const bool cold = s.evict();
  MoeForecast d = s.f;
  d.draft = true;
  s.b.moe_forecast(d);  // predicts {0, 2, 5, 7, 11}
  cpu::ExpertStats st = s.b.expert_stats();
  EXPECT_EQ(st.draft_forecasts, 1u);
  EXPECT_EQ(st.draft_forecast_experts, 5u);
  EXPECT_EQ(st.forecast_experts, 0u) << "a draft forecast is not counted as a layer forecast";
  if (cold) {
    EXPECT_GT(st.draft_forecast_pages, 0u) << "the predicted experts' pages were missing";
  }
  EXPECT_EQ(st.forecast_pages, 0u);
  // only row 1 for the layer forecast: {0, 5, 7}
  MoeForecast l = s.f;
  l.x = s.f.x.slice_rows(1, 1), l.xn = s.f.xn.slice_rows(1, 1), l.logits = s.f.logits.slice_rows(1, 1);
  s.b.moe_forecast(l);
  s.b.moe_experts_routed(s.m);  // routes {2, 3, 9, 14}: the draft forecast had 2, the layer one none
  st = s.b.expert_stats();
  EXPECT_EQ(st.forecast_experts, 3u);
  EXPECT_EQ(st.draft_forecast_routed, 4u);
  EXPECT_EQ(st.draft_forecast_hits, 1u);
  EXPECT_EQ(st.forecast_routed, 4u);
  EXPECT_EQ(st.forecast_hits, 0u);
  // each forecast is compared once: a second routing adds nothing to either
  s.b.moe_experts_routed(s.m);
  EXPECT_EQ(s.b.expert_stats().draft_forecast_routed, 4u);
  EXPECT_EQ(s.b.expert_stats().forecast_routed, 4u);
}

TEST(CpuExpertDraftForecast, OffDoesNothing) {
  for (bool layer : {false, true}) {
    Stacks s(layer, false);
    ASSERT_NE(s.map, nullptr);
    EXPECT_FALSE(s.b.wants_moe_forecast(true));
    EXPECT_EQ(s.b.wants_moe_forecast(false), layer);
    MoeForecast d = s.f;
    d.draft = true;
    s.b.moe_forecast(d);
    s.b.moe_experts_routed(s.m);
    const cpu::ExpertStats st = s.b.expert_stats();
    EXPECT_EQ(st.draft_forecasts + st.draft_forecast_experts + st.draft_forecast_routed + st.draft_forecast_pages, 0u);
    EXPECT_EQ(st.forecast_experts, 0u) << "a draft forecast never counts as a layer forecast";
    EXPECT_EQ(s.logits, std::vector<float>(s.logits.size(), 0.0f)) << "no router product";
  }
}

// ---- random qwen35moe models (f32 stacks on the mapped file: --cpu-repack off) ----

std::unique_ptr<Engine> load(const std::string& path, bool layer_forecast, bool draft_forecast, int64_t blocks = 0) {
  EngineOptions eo;
  eo.model_path = path;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  eo.cpu.repack = false;
  eo.cpu.expert_stats = true;
  eo.cpu.expert_prefetch = true;
  eo.cpu.expert_forecast = layer_forecast;
  eo.cpu.expert_draft_forecast = draft_forecast;
  eo.cpu.expert_draft_forecast_blocks = blocks;
  eo.n_ctx = 256;
  eo.prefill_chunk = 16;
  return Engine::load(eo);
}

std::vector<Token> tokens(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<Token> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<Token>((seed * 131 + i * 37) % (vocab - 2) + 1);
  return v;
}

cpu::ExpertStats stats_of(Engine& e) { return dynamic_cast<cpu::CpuBackend&>(e.backend()).expert_stats(); }

GenerateOptions generation(float temp, int64_t n) {
  GenerateOptions g;
  g.sampling.temperature = temp;
  g.sampling.seed = 5;
  g.max_new_tokens = n;
  g.stop_at_eog = false;
  return g;
}

// MTP speculative generation at fixed depth; its stats in *st.
std::vector<Token> speculative(Engine& e, const std::vector<Token>& prompt, const GenerateOptions& g, int depth,
                               spec::SpecStats* st) {
  spec::SpecOptions so;
  so.mode = spec::SpecMode::MTP;
  so.draft_max = depth;
  so.draft_fixed = true;
  Session s(e, so.draft_max + 1);
  spec::MtpGenerator gen(s, g, so);
  std::vector<Token> out = gen.run(prompt, {});
  *st = gen.stats();
  return out;
}

TEST(CpuExpertDraftForecast, PredictsFromTheTokensEmbeddingsAsTheFirstLayerDoes) {
  // One MoE layer: the residual before its mixer is the embedding, so the layer forecast of a
  // forward and a draft forecast of the same rows see the same x, norm and router.
  std::string args = modeltest::kQwen35MoeArgs;
  args.replace(args.find("--layers 4"), 10, "--layers 1");
  auto e = load(modeltest::make_model("draft_forecast_moe1", args), true, true);
  const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
  for (int64_t seed : {1, 2, 3}) {
    std::vector<Token> t = tokens(5, seed, V);
    std::vector<int32_t> ids(t.begin(), t.end());
    StateOptions so;
    so.n_ctx = 16;
    so.max_chunk = 16;
    auto state = e->model().new_state(so);  // the workspace's rows
    const cpu::ExpertStats s0 = stats_of(*e);
    e->model().forecast_experts(Tensor{ids.data(), GgmlType::I32, 1, 5, sizeof(int32_t)});
    e->model().forward(*state, Batch::sequence(t.data(), 5, 0, false), ForwardOptions{false, false});
    const cpu::ExpertStats s1 = stats_of(*e);
    EXPECT_EQ(s1.draft_forecasts - s0.draft_forecasts, 1u);
    EXPECT_EQ(s1.draft_forecast_experts - s0.draft_forecast_experts, s1.forecast_experts - s0.forecast_experts);
    EXPECT_EQ(s1.draft_forecast_routed - s0.draft_forecast_routed, s1.forecast_routed - s0.forecast_routed);
    EXPECT_EQ(s1.draft_forecast_hits - s0.draft_forecast_hits, s1.forecast_hits - s0.forecast_hits);
    EXPECT_GT(s1.forecast_routed - s0.forecast_routed, 0u) << "the forward routed";
    EXPECT_LE(s1.draft_forecast_experts - s0.draft_forecast_experts, 5u * 3u);
    EXPECT_GE(s1.draft_forecast_experts - s0.draft_forecast_experts, 3u);
  }
}

TEST(CpuExpertDraftForecast, SpeculativeOutputUnchangedAndEveryVerifyForecast) {
  const std::string path = modeltest::make_model("draft_forecast_moe", std::string(modeltest::kQwen35MoeArgs) + " --mtp-layers 1");
  std::vector<Token> ref;
  std::vector<Token> off[2];  // the speculative output with the forecast off, greedy and sampled
  for (bool forecast : {false, true})
    for (bool cold : {false, true})
      for (float temp : {0.0f, 0.8f}) {
        auto e = load(path, false, forecast);
        const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
        if (cold) {
          ::madvise(const_cast<uint8_t*>(e->file().base()), e->file().file_size(), MADV_RANDOM);
          testutil::evict_file_pages(e->file().path(), e->file().base(), e->file().file_size());
        }
        const GenerateOptions g = generation(temp, 20);
        spec::SpecStats sp;
        const std::vector<Token> out = speculative(*e, tokens(9, 4, V), g, 3, &sp);
        const cpu::ExpertStats st = stats_of(*e);
        ASSERT_GT(sp.cycles, 0);
        std::vector<Token>& base = off[temp == 0.0f ? 0 : 1];
        if (base.empty()) base = out;
        EXPECT_EQ(out, base) << "temp " << temp << " forecast " << forecast << " cold " << cold;
        if (temp == 0.0f) {
          if (ref.empty()) {
            Session p(*e);
            ref = p.generate(tokens(9, 4, V), g, {});
          }
          EXPECT_EQ(out, ref) << "forecast " << forecast << " cold " << cold;
        }
        if (!forecast) {
          EXPECT_EQ(st.draft_forecasts, 0u);
          continue;
        }
        // each verify: one forecast per MoE layer (4), each compared with that layer's routing
        EXPECT_EQ(st.draft_forecasts, 4u * static_cast<uint64_t>(sp.cycles));
        EXPECT_GE(st.draft_forecast_routed, 4u * 3u * static_cast<uint64_t>(sp.cycles));
        EXPECT_LE(st.draft_forecast_hits, st.draft_forecast_routed);
        std::printf("draft forecast, temp %.1f, %s: %lld verifies, recall %.3f precision %.3f, %llu pages queued\n", temp,
                    cold ? "cold" : "warm", static_cast<long long>(sp.cycles),
                    static_cast<double>(st.draft_forecast_hits) / static_cast<double>(st.draft_forecast_routed),
                    static_cast<double>(st.draft_forecast_hits) / static_cast<double>(st.draft_forecast_experts),
                    static_cast<unsigned long long>(st.draft_forecast_pages));
      }
}

TEST(CpuExpertDraftForecast, FirstBlocksOnly) {
  const std::string path = modeltest::make_model("draft_forecast_moe", std::string(modeltest::kQwen35MoeArgs) + " --mtp-layers 1");
  for (int64_t blocks : {1, 3, 9}) {
    auto e = load(path, false, true, blocks);
    const int64_t V = std::min<int64_t>(e->info().n_vocab, e->tokenizer().n_vocab());
    spec::SpecStats sp;
    speculative(*e, tokens(7, 2, V), generation(0.0f, 12), 2, &sp);
    ASSERT_GT(sp.cycles, 0);
    // 4 MoE blocks: the first min(blocks, 4) forecast at each verify
    EXPECT_EQ(stats_of(*e).draft_forecasts, static_cast<uint64_t>(std::min<int64_t>(blocks, 4) * sp.cycles))
        << "blocks " << blocks;
  }
}

}  // namespace
}  // namespace df
