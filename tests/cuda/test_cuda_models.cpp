// Whole models on the GPU against the CPU backend: random qwen3 and qwen35 models of several
// shapes and types (written by df_make_model), logits at every position for a prefill in
// chunks (the tiled matmul and the short-batch matvec) and for token-by-token decode;
// greedy decoding; the default model's held-out perplexity.
// Two references on the CPU:
//   native: the CPU backend on the file as it is. For quantized weights it rounds activations
//     to the weight's dot format as llama.cpp does (Q8_0 / Q8_K blocks; BF16 for BF16 weights),
//     the GPU keeps f32 activations: budgets (issue 9) NMSE <= 1e-4 for F32/F16 weights and
//     <= 1e-3 for quantized ones (BF16 counted with them: its activations keep 8 bits), for
//     CUDA's own error on top of the native CPU's measured error against the exact reference
//     at that position (printed; it is what the CPU's activation rounding costs, and on the
//     random qwen35 Q8_0 model alone it exceeds 1e-3).
//   exact: the CPU backend on a copy of the file with every weight dequantized to F32 (the
//     same function, f32 activations): NMSE <= 1e-4 for every type.
// Quantized MoE models are held to the exact reference only (budget 1e-4, greedy): against the
// native CPU the router's choice of experts flips where the CPU's rounded activations move a
// top-k boundary, and the DeltaNet state carries the difference on (measured on the H200 for
// moe-small Q8_0: NMSE 0.39 vs native, 6e-9 vs exact); the native figure is printed, not held.
// Greedy: both backends follow the exact reference's greedy sequence; a step where the GPU's
// argmax differs passes only as a near-tie (the reference's logits of the two tokens within
// 1e-3 of the logit spread), printed and counted.
// The checks above run on a GPU backend with f32 activations in every matvec
// (CudaOptions::int8_x = false), what their budgets were set for. The default backend rounds
// the decode matvecs' activations of Q8_0 / Q4_0 / Q4_K / Q6_K / IQ4_XS weights to int8 as
// the native CPU does (cudamv::Context::int8_x): its token-by-token logits over the first 40
// positions are held to the native CPU at the budget (1e-3 quantized, 1e-4 float)
// with no allowance, and replaying its recorded graphs must give the bits of running it eagerly.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>

#include "../unit/op_test_util.h"
#include "cuda_model_files.h"
#include "backend/cuda/expert_cache.h"
#include "cuda_test_util.h"
#include "common/error.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "quant/cpu/kernels.h"
#include "tokenizer/tokenizer.h"

namespace df::cudatest {
namespace {

// The GPU with f32 activations in every matvec (no int8 rounding): the exact reference's budgets.
// The DeltaNet prefill's delta rule as the engine runs it (EngineOptions::cuda_gdn_prefill: the
// tensor-core chunked kernel, 3xTF32) for calls of more than 16 rows.
cuda::CudaBackend& gpu_exact() {
  static cuda::CudaBackend b([] {
    cuda::CudaOptions o;
    o.int8_x = false;
    static const EngineOptions defaults;
    o.gdn_prefill = defaults.cuda_gdn_prefill;
    return o;
  }());
  return b;
}

// A copy of the GGUF at `path` with every tensor dequantized to F32 (metadata as it is).
std::string dequantized_copy(const std::string& path) {
  auto f = gguf::File::open(path);
  gguf::Writer w;
  for (const auto& [key, value] : f->metadata())
    if (key != "general.alignment") w.set(key, value);
  for (const auto& t : f->tensors()) {
    const int64_t ne0 = t.ne.empty() ? 1 : t.ne[0], rows = t.n_elements() / ne0;
    std::vector<float> data(static_cast<size_t>(t.n_elements()));
    const uint8_t* src = f->tensor_data(t);
    for (int64_t r = 0; r < rows; ++r)
      cpu::dequantize_row(t.type, src + row_bytes(t.type, ne0) * static_cast<size_t>(r), data.data() + r * ne0, ne0);
    w.add_tensor(t.name, GgmlType::F32, t.ne, data.data(), data.size() * sizeof(float));
  }
  const std::string out = path + ".f32.gguf";
  w.write(out);
  return out;
}

struct Loaded {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
};
Loaded load(const std::string& path, Backend& b) {
  Loaded l;
  l.file = gguf::File::open(path);
  l.model = load_model(*l.file, b);
  return l;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Logits of every position: forward over chunks of the given sizes.
std::vector<float> logits_by_chunks(Model& m, const std::vector<int32_t>& tokens, const std::vector<int64_t>& chunks,
                                    bool graphs = true) {
  StateOptions so;
  so.n_ctx = 512;
  so.max_chunk = 160;  // the references' one chunk of 150 rows; the GPU's 110: two 64-row tiles, the second partial
  so.graphs = graphs;
  auto st = m.new_state(so);
  const int64_t V = m.info().n_vocab;
  std::vector<float> out(tokens.size() * static_cast<size_t>(V));
  int64_t pos = 0;
  for (int64_t c : chunks) {
    const ForwardOutputs o = m.forward(*st, Batch::sequence(tokens.data() + pos, c, pos, true));
    m.backend().download(o.logits, out.data() + pos * V, static_cast<size_t>(c * V) * sizeof(float));
    pos += c;
  }
  EXPECT_EQ(pos, static_cast<int64_t>(tokens.size()));
  return out;
}

// Per-position NMSE of got against ref.
std::vector<double> nerr_by_position(const std::vector<float>& ref, const std::vector<float>& got, int64_t V) {
  const int64_t T = static_cast<int64_t>(ref.size()) / V;
  std::vector<double> e;
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> a(ref.begin() + t * V, ref.begin() + (t + 1) * V);
    const std::vector<float> b(got.begin() + t * V, got.begin() + (t + 1) * V);
    e.push_back(optest::nerr(a, b));
  }
  return e;
}

// Every position within budget (plus allowance[t], when given: see the native comparison).
void expect_logits_close(const std::vector<float>& ref, const std::vector<float>& got, int64_t V, double budget,
                         const std::string& what, const std::vector<double>* allowance = nullptr) {
  const std::vector<double> e = nerr_by_position(ref, got, V);
  if (budget < 0) {  // report only (quantized MoE vs the native CPU: router flips, see above)
    std::printf("%s: worst per-position NMSE %.3g (printed, not held: router flips, see above)\n", what.c_str(),
                e.empty() ? 0.0 : *std::max_element(e.begin(), e.end()));
    return;
  }
  double worst = 0;
  int over = 0;  // positions past the plain budget (passing only with the allowance)
  for (size_t t = 0; t < e.size(); ++t) {
    worst = std::max(worst, e[t]);
    const double extra = allowance ? (*allowance)[t] : 0.0;
    if (e[t] > budget) ++over;
    EXPECT_LE(e[t], budget + extra) << what << ": position " << t << " (allowance " << extra << ")";
  }
  std::printf("%s: worst per-position NMSE %.3g (budget %.0e%s), %d of %zu positions above %.0e\n", what.c_str(),
              worst, budget, allowance ? " + the native CPU's own NMSE vs exact" : "", over, e.size(), budget);
}

struct ModelCase {
  std::string name, args;
  double budget;  // vs the native CPU; < 0: printed only (quantized MoE, see above)
};

class CudaModels : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CudaModels, LogitsAtEveryPositionAndGreedy) {
  DF_REQUIRE_GPU();
  const ModelCase& c = GetParam();
  const std::string path = make_model(c.name, c.args);
  Loaded native = load(path, cpu_fast());
  Loaded cpu = load(dequantized_copy(path), cpu_fast());  // the exact reference
  Loaded gpu_m = load(path, gpu_exact());
  // Prefill chunks of 5 (matvec), 35 (GEMM, flash attention; one partial tile) and 110
  // (two 64-row tiles, the second partial); then 40 decode steps after a 110-row prefill.
  // Against the exact reference at every position. The native reference is the first 40
  // positions in one chunk (issue 9's check): the CPU's own rounding of activations depends
  // on its batch (on the H200, a 150-row native reference put even the unchanged decode rows
  // of qwen35_q8_0 at NMSE 6e-3 from it, while they are 7e-9 from the exact one).
  const int64_t V = cpu.model->info().n_vocab, T = 150, P = 110, N = 40;
  const auto tokens = random_tokens(T, V, 5);
  const auto ref = logits_by_chunks(*cpu.model, tokens, {T});
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + N);
  const auto ref_native = logits_by_chunks(*native.model, head, {N});
  auto first = [&](const std::vector<float>& l) { return std::vector<float>(l.begin(), l.begin() + N * V); };
  // The native CPU's own error: its rounding of activations (Q8_0 / Q8_K / BF16 dot formats)
  // against the exact reference. The GPU keeps f32 activations, so CUDA vs native CPU is at
  // least this far apart whatever the GPU does: per position, the budget applies to
  // CUDA's error on top of it (errors add in MSE: nerr(native, cuda) ~ nerr(native, exact) +
  // nerr(exact, cuda)), and CUDA vs exact keeps its own 1e-4 budget.
  const std::vector<double> cpu_own = nerr_by_position(first(ref), ref_native, V);
  std::printf("%s: native cpu vs exact: worst per-position NMSE %.3g, mean %.3g\n", c.name.c_str(),
              *std::max_element(cpu_own.begin(), cpu_own.end()),
              std::accumulate(cpu_own.begin(), cpu_own.end(), 0.0) / static_cast<double>(cpu_own.size()));
  // MoE models: a prefill call of more than 8 rows (CudaOptions::gemm_min_rows; 16 until stop 36)
  // runs the f16 tensor-core GEMM (router included), whose rounding flips the router's top-k at
  // a few positions (on the H200: qwen35moe_f32 3 of 150 positions, worst NMSE 0.039;
  // qwen35moe_q4_k 7 of 150, 0.0027; on an H100 at stop 37, 16-row chunks: qwen35moe_small_q8_0
  // one of 40, 0.0035): those checks are printed, not held, and the first 40 positions in
  // chunks of at most 8 rows (the matvec: no f16 GEMM) are. The 35-row call is a GEMM too (on the
  // H200, qwen35moe_small_q8_0 flipped at one position of 40 after the delta rule's token
  // kernel changed its summation order, NMSE 0.0035): printed.
  const bool moe = c.name.rfind("qwen35moe", 0) == 0;
  const double big_chunk_budget = moe ? -1.0 : 1e-4;
  if (moe) {
    const auto small_chunks = logits_by_chunks(*gpu_m.model, head, {5, 8, 8, 8, 8, 3});
    expect_logits_close(first(ref), small_chunks, V, 1e-4, c.name + " prefill 5+8+8+8+8+3 vs exact");
    expect_logits_close(first(ref), logits_by_chunks(*gpu_m.model, head, {5, 16, 16, 3}), V, -1.0,
                        c.name + " prefill 5+16+16+3 vs exact");
    expect_logits_close(first(ref), logits_by_chunks(*gpu_m.model, head, {5, 35}), V, -1.0,
                        c.name + " prefill 5+35 vs exact");
  }
  const auto prefilled = logits_by_chunks(*gpu_m.model, tokens, {5, 35, 110});
  expect_logits_close(ref, prefilled, V, big_chunk_budget, c.name + " prefill 5+35+110 vs exact");
  expect_logits_close(ref_native, first(prefilled), V, c.budget, c.name + " prefill 5+35 vs native cpu", &cpu_own);
  const auto decoded = logits_by_chunks(*gpu_m.model, tokens, std::vector<int64_t>(T, 1));
  expect_logits_close(ref, decoded, V, 1e-4, c.name + " decode vs exact");
  expect_logits_close(ref_native, first(decoded), V, c.budget, c.name + " decode vs native cpu", &cpu_own);
  std::vector<int64_t> mixed(static_cast<size_t>(T - P + 1), 1);
  mixed[0] = P;
  const auto after = logits_by_chunks(*gpu_m.model, tokens, mixed);
  const std::vector<float> tail_after(after.begin() + P * V, after.end()), tail_dec(decoded.begin() + P * V, decoded.end()),
      tail_ref(ref.begin() + P * V, ref.end());
  expect_logits_close(tail_dec, tail_after, V, big_chunk_budget, c.name + " decode after a 110-row prefill vs token-by-token");
  expect_logits_close(tail_ref, tail_after, V, big_chunk_budget, c.name + " decode after a 110-row prefill vs exact");
  // Decode steps replayed from recorded graphs give the bits of running every op eagerly.
  EXPECT_EQ(decoded, logits_by_chunks(*gpu_m.model, tokens, std::vector<int64_t>(T, 1), false)) << c.name;
  {  // the default backend (int8 activations in the decode matvecs) against the native CPU
    Loaded gpu8 = load(path, *gpu());
    const std::vector<int32_t> head_t(tokens.begin(), tokens.begin() + N);
    const auto dec8 = logits_by_chunks(*gpu8.model, head_t, std::vector<int64_t>(N, 1));
    expect_logits_close(ref_native, dec8, V, c.budget, c.name + " decode, int8 x (default) vs native cpu");
    EXPECT_EQ(dec8, logits_by_chunks(*gpu8.model, head_t, std::vector<int64_t>(N, 1), false)) << c.name << " int8 x";
  }
  {  // the engine's own configuration (shipped_cuda_options: every switch as EngineOptions sets it)
    Loaded gs = load(path, *gpu_shipped());
    const std::vector<int64_t> ones(static_cast<size_t>(N), 1);
    const auto decs = logits_by_chunks(*gs.model, head, ones);
    expect_logits_close(ref_native, decs, V, c.budget, c.name + " decode, shipped options vs native cpu");
    EXPECT_EQ(decs, logits_by_chunks(*gs.model, head, ones, false)) << c.name << " shipped options: graphs vs eager";
    // Prefill in a 5-row call (the matvec) and a 35-row one (the GEMM; MoE: f16 rounding may
    // flip the router, printed as above), against the native CPU with its own error allowed.
    expect_logits_close(ref_native, logits_by_chunks(*gs.model, head, {5, 35}), V, moe ? -1.0 : c.budget,
                        c.name + " prefill 5+35, shipped options vs native cpu", &cpu_own);
  }

  // Greedy, teacher-forced on the CPU's choices.
  StateOptions so;
  so.n_ctx = 256;
  so.max_chunk = 16;
  auto sc = cpu.model->new_state(so), sg = gpu_m.model->new_state(so);
  std::vector<float> lc(static_cast<size_t>(V)), lg(static_cast<size_t>(V));
  int32_t tok = tokens[0];
  int ties = 0, steps = 48;
  for (int64_t p = 0; p < steps; ++p) {
    const Batch b = Batch::sequence(&tok, 1, p, false);
    cpu_fast().download(cpu.model->forward(*sc, b).logits, lc.data(), lc.size() * sizeof(float));
    gpu_exact().download(gpu_m.model->forward(*sg, b).logits, lg.data(), lg.size() * sizeof(float));
    const auto ac = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
    const auto ag = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (ac != ag) {
      double mean = 0, var = 0;
      for (float v : lc) mean += v;
      mean /= static_cast<double>(V);
      for (float v : lc) var += (v - mean) * (v - mean);
      const double spread = std::sqrt(var / static_cast<double>(V));
      const double gap = std::fabs(static_cast<double>(lc[ac]) - lc[ag]);
      std::printf("%s: near-tie at step %lld: cpu %d, cuda %d, cpu logit gap %.3g (spread %.3g)\n", c.name.c_str(),
                  static_cast<long long>(p), ac, ag, gap, spread);
      EXPECT_LE(gap, 1e-3 * spread) << c.name << ": greedy differs at step " << p << " beyond a near-tie";
      ++ties;
    }
    tok = ac;
  }
  std::printf("%s: greedy %d steps, %d near-ties\n", c.name.c_str(), steps, ties);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaModels,
    ::testing::Values(
        ModelCase{"qwen3_f32", "--arch qwen3 --layers 2 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 --type f32", 1e-4},
        ModelCase{"qwen3_f16_hd128_tied", "--arch qwen3 --layers 3 --dim 512 --ff 768 --heads 8 --kv-heads 2 --head-dim 128 --type f16 --tied", 1e-4},
        ModelCase{"qwen3_q8_0", "--arch qwen3 --layers 2 --dim 384 --ff 1024 --heads 6 --kv-heads 3 --head-dim 64 --type q8_0", 1e-3},
        ModelCase{"qwen3_q4_0", "--arch qwen3 --layers 2 --dim 256 --ff 512 --heads 2 --kv-heads 1 --head-dim 128 --type q4_0", 1e-3},
        ModelCase{"qwen35_f32", "--arch qwen35 --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 --type f32", 1e-4},
        ModelCase{"qwen35_bf16_s128", "--arch qwen35 --layers 4 --dim 256 --ff 512 --heads 2 --kv-heads 1 --head-dim 128 "
                                      "--ssm-state 128 --ssm-k-heads 1 --ssm-v-heads 2 --type bf16", 1e-3},
        ModelCase{"qwen35_q8_0", "--arch qwen35 --layers 4 --dim 384 --ff 768 --heads 6 --kv-heads 2 --head-dim 64 "
                                 "--ssm-k-heads 3 --ssm-v-heads 6 --mtp-layers 1 --type q8_0", 1e-3},
        // qwen35moe: routed experts through matmul_id (prefill rows grouped per expert, decode
        // one matvec per routed expert), the shared expert and its gate, the combine.
        ModelCase{"qwen35moe_f32", "--arch qwen35moe --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
                                   "--experts 16 --experts-used 4 --expert-ff 128 --shexp-ff 256 --type f32", 1e-4},
        ModelCase{"qwen35moe_small_q8_0", "--arch qwen35moe --preset moe-small --layers 4 --type q8_0", -1},
        ModelCase{"qwen35moe_q4_k", "--arch qwen35moe --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
                                    "--experts 32 --experts-used 8 --expert-ff 256 --shexp-ff 256 --mtp-layers 1 --type q4_k",
                  -1}),
    [](const auto& info) { return info.param.name; });

// The routed experts of prefill calls (35 and 110 rows) by the grouped tensor-core GEMM
// (CudaOptions::moe_gemm) against the exact CPU reference at every position, beside the same
// backend without it (the grouped matvec): as for the MoE models above, f16 rounding (here of
// the experts' products as well as the router's) may flip the router's top-k at a few
// positions, so the quantized budget (1e-3) is held at 90 % of the positions and the worst
// printed; the positions of chunks of at most 8 rows (the matvec, no GEMM: CudaOptions::gemm_min_rows)
// are held to 1e-4 at every position.
TEST(CudaModelsMoeGemm, PrefillLogitsVsExact) {
  DF_REQUIRE_GPU();
  auto make = [](bool on) {
    cuda::CudaOptions o;
    o.int8_x = false;
    o.moe_gemm = on;
    o.moe_gemm_min_rows = 16;  // the GEMM from 17 rows here; from 9 below
    return o;
  };
  cuda::CudaBackend on(make(true)), off(make(false));
  for (const char* name : {"qwen35moe_small_q8_0", "qwen35moe_q4_k"}) {
    const std::string args = std::string(name) == "qwen35moe_q4_k"
                                 ? "--arch qwen35moe --layers 4 --dim 256 --ff 512 --heads 4 --kv-heads 2 --head-dim 64 "
                                   "--experts 32 --experts-used 8 --expert-ff 256 --shexp-ff 256 --mtp-layers 1 --type q4_k"
                                 : "--arch qwen35moe --preset moe-small --layers 4 --type q8_0";
    const std::string path = make_model(name, args);
    Loaded cpu = load(dequantized_copy(path), cpu_fast());
    Loaded g_on = load(path, on), g_off = load(path, off);
    const int64_t V = cpu.model->info().n_vocab, T = 150;
    const auto tokens = random_tokens(T, V, 5);
    const auto ref = logits_by_chunks(*cpu.model, tokens, {T});
    const auto got = logits_by_chunks(*g_on.model, tokens, {5, 35, 110});
    const auto was = logits_by_chunks(*g_off.model, tokens, {5, 35, 110});
    const std::vector<double> e = nerr_by_position(ref, got, V), e_off = nerr_by_position(ref, was, V);
    const auto over = std::count_if(e.begin(), e.end(), [](double v) { return v > 1e-3; });
    const auto over_off = std::count_if(e_off.begin(), e_off.end(), [](double v) { return v > 1e-3; });
    std::printf("%s prefill 5+35+110 vs exact: moe gemm worst %.3g, %lld of %lld positions above 1e-3; grouped matvec "
                "worst %.3g, %lld above\n",
                name, *std::max_element(e.begin(), e.end()), static_cast<long long>(over), static_cast<long long>(T),
                *std::max_element(e_off.begin(), e_off.end()), static_cast<long long>(over_off));
    EXPECT_LE(over, T / 10) << name;
    const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 40);
    const std::vector<float> ref_head(ref.begin(), ref.begin() + 40 * V);
    expect_logits_close(ref_head, logits_by_chunks(*g_on.model, head, {5, 8, 8, 8, 8, 3}), V, 1e-4,
                        std::string(name) + " moe gemm, prefill 5+8+8+8+8+3 vs exact");
    {  // CudaOptions::moe_gemm_min_rows 8: the GEMM from 9 rows; calls of up to 8 rows keep the matvec's bits
      cuda::CudaOptions o9 = make(true);
      o9.moe_gemm_min_rows = 8;
      cuda::CudaBackend b9(o9);
      Loaded g9 = load(path, b9);
      const auto got9 = logits_by_chunks(*g9.model, tokens, {5, 9, 12, 16, 108});
      const std::vector<double> e9 = nerr_by_position(ref, got9, V);
      const auto over9 = std::count_if(e9.begin(), e9.end(), [](double v) { return v > 1e-3; });
      std::printf("%s prefill 5+9+12+16+108 vs exact, moe gemm from 9 rows: worst %.3g, %lld of %lld above 1e-3\n", name,
                  *std::max_element(e9.begin(), e9.end()), static_cast<long long>(over9), static_cast<long long>(T));
      EXPECT_LE(over9, T / 10) << name << ", moe gemm from 9 rows";
      EXPECT_EQ(logits_by_chunks(*g9.model, head, {5, 8, 8, 8, 8, 3}), logits_by_chunks(*g_on.model, head, {5, 8, 8, 8, 8, 3}))
          << name << ": calls of up to 8 rows changed with moe_gemm_min_rows";
    }
  }
}

// Routed experts streamed through a device cache smaller than them (pinned host copies read
// in place on a miss, a placement by use counts) give the bits of the all-resident run:
// prefill in chunks (more experts per call than the cache holds) and decode (graphs).
TEST(CudaExpertCache, SmallCacheGivesTheResidentBits) {
  DF_REQUIRE_GPU();
  const std::string path = make_model("moe_cache", "--arch qwen35moe --layers 3 --dim 256 --ff 512 --heads 4 --kv-heads 2 "
                                                   "--head-dim 64 --experts 16 --experts-used 4 --expert-ff 256 "
                                                   "--shexp-ff 256 --type q4_k");
  cuda::CudaOptions o;
  // 40 of the 144 experts (9 stacks of 16, 36 KiB each): most lookups miss and read the
  // expert from host memory; the placement starts with experts 0..4 of each stack and moves
  // towards the most used ones.
  o.expert_cache_bytes = 40 * 36864;
  cuda::CudaBackend small(o);
  Loaded resident = load(path, *gpu());
  Loaded streamed = load(path, small);
  ASSERT_FALSE(gpu()->experts_streamed());
  ASSERT_TRUE(small.experts_streamed());
  const int64_t V = resident.model->info().n_vocab, T = 40;
  const auto tokens = random_tokens(T, V, 9);
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, {5, 35}), logits_by_chunks(*streamed.model, tokens, {5, 35}));
  const std::vector<int64_t> ones(T, 1);
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, ones), logits_by_chunks(*streamed.model, tokens, ones));
  const cuda::ExpertCacheStats s = small.expert_cache_stats();
  std::printf("expert cache: %lld slots, %llu of %llu bytes, hits %llu, misses %llu, %llu bytes read in place, "
              "%llu replacements, %llu bytes uploaded\n",
              static_cast<long long>(s.slots), static_cast<unsigned long long>(s.capacity_bytes),
              static_cast<unsigned long long>(s.host_bytes), static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.bytes_in_place),
              static_cast<unsigned long long>(s.replacements), static_cast<unsigned long long>(s.bytes_uploaded));
  EXPECT_EQ(s.slots, 40);
  EXPECT_EQ(s.host_bytes, 144u * 36864u);
  EXPECT_GT(s.misses, 144u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_EQ(s.bytes_in_place, s.misses * 36864u);
  EXPECT_GE(s.replacements, 40u);  // the first placement fills every slot
  // CudaOptions::moe_streamed_fused with the routed pipe, PDL and the short pipe: decode steps
  // in the fused expert block over the streamed stacks, the same bits and the same lookups.
  cuda::CudaOptions fo = o;
  fo.moe_streamed_fused = true, fo.moe_pdl = true, fo.moe_pipe = 2, fo.mv_short_pipe = 2;
  cuda::CudaBackend fast(fo);
  Loaded fused = load(path, fast);
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, {5, 35}), logits_by_chunks(*fused.model, tokens, {5, 35}));
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, ones), logits_by_chunks(*fused.model, tokens, ones));
  const cuda::ExpertCacheStats f = fast.expert_cache_stats();
  EXPECT_EQ(f.hits + f.misses, s.hits + s.misses);
  EXPECT_GT(f.misses, 144u);
  EXPECT_EQ(f.bytes_in_place, f.misses * 36864u);
}

// The file tier (CudaOptions::expert_source file): no host copy of the experts; each call's
// missed experts read from the GGUF (O_DIRECT where /tmp takes it) into a cache of 40 of the
// 144 experts, so most lookups miss. The same packed bytes in the slots give the bits of the
// all-resident run: prefill in chunks (a 35-row call routes to all 16 experts of its gate and
// up stacks: 32 slots, the block's prefetch of 48 skipped) and decode (eager: no graphs), and
// so the same greedy tokens. A cache smaller than one call's experts is a clear error.
TEST(CudaExpertCache, FileTierGivesTheResidentBits) {
  DF_REQUIRE_GPU();
  const std::string path = make_model("moe_cache", "--arch qwen35moe --layers 3 --dim 256 --ff 512 --heads 4 --kv-heads 2 "
                                                   "--head-dim 64 --experts 16 --experts-used 4 --expert-ff 256 "
                                                   "--shexp-ff 256 --type q4_k");
  cuda::CudaOptions o;
  o.expert_cache_bytes = 40 * 36864;
  o.expert_source = cuda::ExpertSource::file;
  o.moe_streamed_fused = true;  // the CLI's default (its fused one-row path declines the file tier)
  cuda::CudaBackend small(o);
  Loaded resident = load(path, *gpu());
  Loaded streamed = load(path, small);
  ASSERT_TRUE(small.experts_streamed());
  EXPECT_FALSE(small.prefault_weights());  // the experts are not read at load
  const int64_t V = resident.model->info().n_vocab, T = 40;
  const auto tokens = random_tokens(T, V, 9);
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, {5, 35}), logits_by_chunks(*streamed.model, tokens, {5, 35}));
  const std::vector<int64_t> ones(T, 1);
  EXPECT_EQ(logits_by_chunks(*resident.model, tokens, ones), logits_by_chunks(*streamed.model, tokens, ones));
  {  // greedy, 24 steps from each backend's own choices
    StateOptions so;
    so.n_ctx = 64;
    so.max_chunk = 16;
    auto sr = resident.model->new_state(so), sf = streamed.model->new_state(so);
    std::vector<float> lr(static_cast<size_t>(V)), lf(static_cast<size_t>(V));
    int32_t tr = tokens[0], tf = tokens[0];
    for (int64_t p = 0; p < 24; ++p) {
      gpu()->download(resident.model->forward(*sr, Batch::sequence(&tr, 1, p, false)).logits, lr.data(), lr.size() * 4);
      small.download(streamed.model->forward(*sf, Batch::sequence(&tf, 1, p, false)).logits, lf.data(), lf.size() * 4);
      tr = static_cast<int32_t>(std::max_element(lr.begin(), lr.end()) - lr.begin());
      tf = static_cast<int32_t>(std::max_element(lf.begin(), lf.end()) - lf.begin());
      ASSERT_EQ(tr, tf) << "greedy step " << p;
    }
  }
  const cuda::ExpertCacheStats s = small.expert_cache_stats();
  std::printf("file tier (%s): %lld slots, hits %llu, misses %llu, %llu loads, %llu bytes from disk in %.3f s, "
              "stalled %.3f s over %llu loading calls\n",
              s.direct ? "O_DIRECT" : "buffered", static_cast<long long>(s.slots), static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.loads),
              static_cast<unsigned long long>(s.bytes_from_disk), s.read_seconds, s.stall_seconds,
              static_cast<unsigned long long>(s.syncs));
  EXPECT_TRUE(s.from_file);
  EXPECT_EQ(s.slots, 40);
  EXPECT_EQ(s.host_bytes, 0u);
  EXPECT_EQ(s.expert_bytes, 144u * 36864u);
  EXPECT_GT(s.misses, 144u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GE(s.loads, s.misses);  // prefetched experts count as misses at their first lookup
  EXPECT_EQ(s.bytes_from_disk, s.loads * 36864u);  // Q4_K 256 x 256: 36864 bytes in the file and packed
  EXPECT_EQ(s.bytes_from_memory, 0u);

  cuda::CudaOptions tiny = o;
  tiny.expert_cache_bytes = 8 * 36864;  // 8 slots: fewer than the 32 gate/up experts of a 35-row call
  cuda::CudaBackend tb(tiny);
  Loaded t = load(path, tb);
  auto st = t.model->new_state(StateOptions{});
  try {
    t.model->forward(*st, Batch::sequence(tokens.data(), 35, 0, true));
    ADD_FAILURE() << "a cache of 8 experts ran a 35-row call routing to 32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("raise --expert-cache-mb"), std::string::npos) << e.what();
  }
}

// The engine's own configuration (shipped_cuda_options) with the routed experts streamed from
// a cache of 40 of the 144 experts, from pinned host memory and from the file, gives the bits
// of the resident run of the same configuration, except its routed GEMM (moe_gemm: resident
// stacks only, streamed ones keep the grouped matvec, so a 35-row call would not be the same
// bits): off in the reference. Calls of 5 and 35 rows, of 1..8 rows (a verify's), and decode
// steps. Stop 42's file-tier crash (the fused one-row block taking file-tier stacks) happened
// with these switches only: the tests above ran CudaOptions{}.
TEST(CudaExpertCache, ShippedOptionsGiveTheResidentBits) {
  DF_REQUIRE_GPU();
  const std::string path = make_model("moe_cache", "--arch qwen35moe --layers 3 --dim 256 --ff 512 --heads 4 --kv-heads 2 "
                                                   "--head-dim 64 --experts 16 --experts-used 4 --expert-ff 256 "
                                                   "--shexp-ff 256 --type q4_k");
  cuda::CudaOptions ro = shipped_cuda_options();
  ro.moe_gemm = false;
  ro.expert_cache_bytes = 0;  // every expert resident
  cuda::CudaBackend rb(ro);
  Loaded resident = load(path, rb);
  ASSERT_FALSE(rb.experts_streamed());
  const int64_t V = resident.model->info().n_vocab, T = 40;
  const auto tokens = random_tokens(T, V, 11);
  const std::vector<int64_t> ones(T, 1), rows{5, 35}, verify{1, 2, 3, 4, 5, 6, 7, 8, 4};
  const auto ref_rows = logits_by_chunks(*resident.model, tokens, rows);
  const auto ref_verify = logits_by_chunks(*resident.model, tokens, verify);
  const auto ref_ones = logits_by_chunks(*resident.model, tokens, ones);
  for (const cuda::ExpertSource src : {cuda::ExpertSource::host, cuda::ExpertSource::file}) {
    const char* what = src == cuda::ExpertSource::host ? "host tier" : "file tier";
    cuda::CudaOptions o = shipped_cuda_options();
    o.expert_cache_bytes = 40 * 36864;
    o.expert_source = src;
    cuda::CudaBackend b(o);
    Loaded streamed = load(path, b);
    ASSERT_TRUE(b.experts_streamed()) << what;
    EXPECT_EQ(ref_rows, logits_by_chunks(*streamed.model, tokens, rows)) << what << ": 5 + 35 rows";
    EXPECT_EQ(ref_verify, logits_by_chunks(*streamed.model, tokens, verify)) << what << ": calls of 1..8 rows";
    EXPECT_EQ(ref_ones, logits_by_chunks(*streamed.model, tokens, ones)) << what << ": decode steps";
    const cuda::ExpertCacheStats s = b.expert_cache_stats();
    std::printf("shipped options, %s: hits %llu, misses %llu\n", what, static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.misses));
    EXPECT_GT(s.misses, 144u) << what;
  }
}

// -log softmax(row)[target], in double (cmd_perplexity's formula).
double nll_of(const float* row, int64_t V, int32_t target) {
  float mx = row[0];
  for (int64_t i = 1; i < V; ++i) mx = std::max(mx, row[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
  return std::log(sum) - static_cast<double>(row[target] - mx);
}

// llama.cpp's method as `diskformer perplexity -c 512`: windows of 512 from an empty state,
// the second half scored.
double perplexity(Model& m, const std::vector<int32_t>& tokens, int64_t n_ctx) {
  StateOptions so;
  so.n_ctx = n_ctx;
  so.max_chunk = n_ctx;
  auto st = m.new_state(so);
  const int64_t V = m.info().n_vocab, n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
  std::vector<float> logits(static_cast<size_t>(n_ctx * V));
  double nll = 0;
  int64_t count = 0;
  for (int64_t c = 0; c < n_chunk; ++c) {
    const int32_t* w = tokens.data() + c * n_ctx;
    m.backend().download(m.forward(*st, Batch::sequence(w, n_ctx, 0, true)).logits, logits.data(),
                         logits.size() * sizeof(float));
    for (int64_t j = n_ctx / 2; j < n_ctx - 1; ++j, ++count) nll += nll_of(logits.data() + j * V, V, w[j + 1]);
  }
  return std::exp(nll / static_cast<double>(count));
}

TEST(CudaDefaultModel, HeldOutPerplexityWithinHalfAPercent) {
  DF_REQUIRE_GPU();
  const std::string path = source_file("models/default.gguf");
  Loaded cpu = load(path, cpu_fast());
  Loaded gpu_m = load(path, *gpu());
  auto tok = Tokenizer::from_gguf(*cpu.file);
  std::FILE* f = std::fopen(source_file("models/heldout.txt").c_str(), "rb");
  ASSERT_TRUE(f);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  const auto tokens = tok->encode(text, false);
  const double p_gpu = perplexity(*gpu_m.model, tokens, 512);
  const double p_cpu = perplexity(*cpu.model, tokens, 512);
  std::printf("default model held-out perplexity: cpu %.6f, cuda %.6f (%+.4f %%)\n", p_cpu, p_gpu,
              100.0 * (p_gpu / p_cpu - 1.0));
  EXPECT_LE(std::fabs(p_gpu / p_cpu - 1.0), 0.005);
}

}  // namespace
}  // namespace df::cudatest
