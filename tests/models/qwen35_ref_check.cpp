#include "qwen35_ref_check.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "diskformer/engine.h"
#include "ref_harness.h"

namespace df::reftest {
namespace {

const std::vector<std::string> kPrompts = {
    "The quick brown fox jumps over the lazy dog.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "import os\nimport sys\n\nfor path in sys.argv[1:]:\n    print(os.path.basename(path))",
    "Numbers 12345 and 67.89, symbols #@!, and unicode: caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac",
};

const std::string kRefCtx = " --kv f32 --fa off";

// A routed model's near-tie of its own kind: where a row's router ranks its k-th expert within
// this many logits of the best one left out, another engine's rounding may pick the other
// expert, and the row's output then differs by far more than the logits' budget.
constexpr float kRouteTie = 1e-3f;

// Our smallest routing gap (CpuBackend::min_route_gap) over the MoE layers of the row at
// position `pos` of seq, decoded alone after the rows before it.
float route_gap_at(Engine& e, const std::vector<Token>& seq, size_t pos) {
  auto& cpu = dynamic_cast<cpu::CpuBackend&>(e.backend());
  Session s(e);
  s.prefill(std::vector<Token>(seq.begin(), seq.begin() + static_cast<std::ptrdiff_t>(pos)));
  cpu.reset_route_gap();
  s.decode(seq[pos]);
  return cpu.min_route_gap();
}

}  // namespace

void check_hybrid_against_llama(const std::string& model, const HybridCheck& c) {
  const std::string dir = work_dir();

  // References from llama.cpp: logits of every position, 32 greedy tokens.
  std::vector<std::vector<Token>> prompts;
  {
    EngineOptions eo;
    eo.model_path = model;
    auto engine = Engine::load(eo);
    ASSERT_EQ(engine->info().arch, c.arch);
    for (const auto& p : kPrompts) prompts.push_back(engine->tokenizer().encode(p, true));
  }
  const std::string in = dir + "/" + c.name + "_prompts.json";
  write_file(in, nlohmann::json(prompts).dump());
  const std::string bin = dir + "/" + c.name + "_logits.bin";
  const auto meta = nlohmann::json::parse(
      run(std::string(DF_LLAMA_REF) + " logits -m " + model + " --in " + in + " --out " + bin + " -c 256" + kRefCtx));
  const auto ref = read_floats(bin);
  const std::string gen = dir + "/" + c.name + "_gen.json";
  run(std::string(DF_LLAMA_REF) + " generate -m " + model + " --in " + in + " -n 32 --out " + gen + kRefCtx);
  const auto g = nlohmann::json::parse(read_file(gen));

  for (const int64_t chunk : {1, 7, 64}) {
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    EngineOptions eo;
    eo.model_path = model;
    eo.cpu.threads = 2;
    eo.n_ctx = 256;
    eo.prefill_chunk = chunk;
    eo.kv_f32 = true;
    eo.cpu.repack = c.cpu_repack;
    auto engine = Engine::load(eo);
    const int64_t n_vocab = meta["n_vocab"];
    ASSERT_EQ(n_vocab, engine->info().n_vocab);
    if (c.arch == "qwen35moe") {
      ASSERT_GT(engine->info().n_expert, 0);
    }

    // 1. logits at every position
    size_t off = 0;
    double worst = 0;
    Session session(*engine);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto got = session.logits_all(prompts[i]);
      ASSERT_LE(off + got.size(), ref.size());
      const double e = normalised_error(ref.data() + off, got.data(), got.size());
      worst = std::max(worst, e);
      EXPECT_LE(e, c.max_nerr) << c.name << " prompt " << i;
      off += got.size();
    }
    EXPECT_EQ(off, ref.size());
    std::printf("%s chunk %lld: max normalised logits error %.3g\n", c.name.c_str(), static_cast<long long>(chunk), worst);

    // 2. greedy generation, token for token. A divergence is excused only at a near-tie:
    //    where llama.cpp's own top two logits are closer than c.tie_margin, or (qwen35moe) where
    //    a MoE layer of ours ranks that row's routed experts within kRouteTie (printed).
    const float tie_margin = c.tie_margin;
    const bool moe = c.arch == "qwen35moe";
    int excused = 0, route_ties = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateOptions go;
      go.max_new_tokens = 32;
      go.stop_at_eog = false;
      Session s(*engine);
      const auto ours = s.generate(prompts[i], go, nullptr);
      const auto theirs = g["tokens"][i].get<std::vector<Token>>();
      const auto margins = g["margins"][i].get<std::vector<float>>();
      ASSERT_EQ(ours.size(), theirs.size());
      for (size_t t = 0; t < ours.size(); ++t) {
        if (ours[t] == theirs[t]) continue;
        if (margins[t] < tie_margin) {
          ++excused;
          break;
        }
        if (moe) {
          std::vector<Token> seq = prompts[i];
          seq.insert(seq.end(), ours.begin(), ours.begin() + static_cast<std::ptrdiff_t>(t));
          const float gap = route_gap_at(*engine, seq, seq.size() - 1);
          if (gap < kRouteTie) {
            std::printf("%s prompt %zu: generated token %zu differs (ours %d, llama.cpp %d) at a routing near-tie "
                        "(our gap %.3g)\n", c.name.c_str(), i, t, ours[t], theirs[t], gap);
            ++excused, ++route_ties;
            break;
          }
        }
        ADD_FAILURE() << c.name << " prompt " << i << " differs at generated token " << t << ": ours " << ours[t]
                      << ", llama.cpp " << theirs[t] << " (llama.cpp margin " << margins[t] << ", tie margin "
                      << tie_margin << ")";
        break;
      }
    }
    if (c.max_nerr <= 1e-4) {
      EXPECT_LE(excused, 1) << "more than one prompt diverged at a near-tie";
    }

    // 3. teacher-forced: over each prompt followed by llama.cpp's 32 tokens, our argmax must be
    //    llama.cpp's token at every generated position that is not a near-tie (this checks all
    //    32 positions even after a free-running divergence).
    int checked = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto theirs = g["tokens"][i].get<std::vector<Token>>();
      const auto margins = g["margins"][i].get<std::vector<float>>();
      std::vector<Token> seq = prompts[i];
      seq.insert(seq.end(), theirs.begin(), theirs.end() - 1);
      Session s(*engine);
      const auto all = s.logits_all(seq);
      for (size_t t = 0; t < theirs.size(); ++t) {
        if (margins[t] < tie_margin) continue;
        const size_t pos = prompts[i].size() - 1 + t;
        const float* row = all.data() + pos * static_cast<size_t>(n_vocab);
        const auto best = static_cast<Token>(std::max_element(row, row + n_vocab) - row);
        if (best != theirs[t] && moe) {
          const float gap = route_gap_at(*engine, seq, pos);
          if (gap < kRouteTie) {
            std::printf("%s prompt %zu position %zu: argmax %d, llama.cpp %d, at a routing near-tie (our gap %.3g)\n",
                        c.name.c_str(), i, t, best, theirs[t], gap);
            ++route_ties;
            continue;
          }
        }
        EXPECT_EQ(best, theirs[t]) << c.name << " prompt " << i << " position " << t << " (llama.cpp margin "
                                   << margins[t] << ")";
        ++checked;
      }
    }
    EXPECT_GE(checked, 5 * 32 / 2) << "too few positions outside the tie margin";
    std::printf("%s chunk %lld: greedy near-tie margin %.3g, %d prompts diverged at a near-tie, %d/160 teacher-forced "
                "positions checked, %d routing near-ties excused\n",
                c.name.c_str(), static_cast<long long>(chunk), tie_margin, excused, checked, route_ties);
    EXPECT_LE(route_ties, 4) << "routing near-ties are rare: more mean a routing that differs";
  }
}

}  // namespace df::reftest
