// Decode steps of several sequences in one forward (the server's step) against one sequence
// alone, interleaved so that a busy machine slows both alike: tokens/s of each and the ratio.
//
//   bench_batch_decode [-m MODEL] [-t THREADS] [--rows 1,8] [--steps 64] [--isa auto]
//
// Prints one JSON object: for each row count the median step time (wall clock and process
// CPU time: on a machine shared with other jobs the wall clock of a longer step includes
// the time it waited for a core, the CPU time does not) and rows/s, and the speedup of
// every row count over the first.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "diskformer/engine.h"

int main(int argc, char** argv) {
  CLI::App app{"batched decode steps vs one sequence"};
  std::string model = DF_DEFAULT_MODEL;
  int threads = 0, steps = 64;
  std::string isa = "auto";
  std::vector<int> rows = {1, 8};
  app.add_option("-m,--model", model, "GGUF model");
  app.add_option("-t,--threads", threads, "CPU threads (0: all)");
  app.add_option("--isa", isa, "auto | scalar | avx2 | avx512");
  app.add_option("--rows", rows, "row counts to compare (the first is the baseline)")->delimiter(',');
  app.add_option("--steps", steps, "steps of each row count");
  CLI11_PARSE(app, argc, argv);

  df::EngineOptions eo;
  eo.model_path = model;
  eo.device = "cpu";
  eo.cpu.threads = threads;
  eo.cpu.isa = isa;
  eo.n_ctx = 64 + steps + 8;
  auto engine = df::Engine::load(eo);
  const int max_rows = *std::max_element(rows.begin(), rows.end());
  std::vector<std::unique_ptr<df::Session>> sessions;
  std::vector<df::Token> prompt = engine->tokenizer().encode("def fibonacci(n):\n", true);
  for (int i = 0; i < max_rows; ++i) {
    sessions.push_back(std::make_unique<df::Session>(*engine));
    sessions.back()->prefill(prompt);
  }
  const auto p0 = static_cast<int64_t>(prompt.size());
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::vector<std::vector<double>> times(rows.size()), cpu_times(rows.size());
  for (int s = 0; s < steps; ++s) {
    for (size_t k = 0; k < rows.size(); ++k) {
      std::vector<df::Session*> ss;
      std::vector<df::Token> toks;
      for (int i = 0; i < rows[k]; ++i) {
        df::Session& se = *sessions[static_cast<size_t>(i)];
        if (se.position() >= se.n_ctx() - 1) se.rewind(p0);
        ss.push_back(&se);
        toks.push_back(static_cast<df::Token>(100 + (s * 7 + i * 13) % 500));
      }
      const auto t0 = std::chrono::steady_clock::now();
      const double c0 = cpu_now();
      df::ForwardOutputs out = df::Session::append_each(ss, toks);
      std::vector<float> sink(static_cast<size_t>(out.logits.cols));
      engine->backend().download(out.logits.slice_rows(0, 1), sink.data(), out.logits.stride);
      times[k].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      cpu_times[k].push_back(cpu_now() - c0);
    }
  }
  nlohmann::json res = {{"benchmark", "batch_decode"}, {"model", model}, {"threads", threads}, {"steps", steps},
                        {"isa", isa}, {"backend", engine->backend_name()}};
  auto median = [](std::vector<double> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  double base = 0, base_cpu = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const double med = median(times[k]), med_cpu = median(cpu_times[k]);
    const double tps = rows[k] / med, tps_cpu = rows[k] / med_cpu;
    if (k == 0) {
      base = tps;
      base_cpu = tps_cpu;
    }
    res["rows"].push_back({{"rows", rows[k]},
                           {"median_step_ms", med * 1e3},
                           {"tokens_per_s", tps},
                           {"speedup_vs_first", tps / base},
                           {"median_step_cpu_ms", med_cpu * 1e3},
                           {"tokens_per_cpu_s", tps_cpu},
                           {"cpu_speedup_vs_first", tps_cpu / base_cpu}});
  }
  std::printf("%s\n", res.dump(1).c_str());
}
