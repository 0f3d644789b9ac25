// `diskformer perplexity`: llama.cpp's method. The text is split into non-overlapping
// windows of n_ctx tokens; each window is evaluated from an empty cache and the second half
// of its positions is scored (position j predicts token j + 1). Last line: "PPL = X".
#include <cmath>
#include <cstdio>

#include "common.h"
#include "common/error.h"

namespace df::cli {
namespace {

// -log softmax(row)[target], in double.
double nll_of(const float* row, int64_t n_vocab, int32_t target) {
  float mx = row[0];
  for (int64_t i = 1; i < n_vocab; ++i) mx = std::max(mx, row[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(row[i] - mx));
  return std::log(sum) - static_cast<double>(row[target] - mx);
}

}  // namespace

void register_perplexity(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    std::string file;
    int64_t chunks = -1;
  };
  auto f = std::make_shared<Flags>();
  f->model.ctx = 512;
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file (llama.cpp's method)");
  add_model_flags(*cmd, f->model);
  cmd->add_option("-f,--file", f->file, "text file")->required();
  cmd->add_option("--chunks", f->chunks, "score at most this many windows (-1: all)");
  cmd->callback([f] {
    auto engine = load_engine(f->model);
    const auto tokens = engine->tokenizer().encode(read_file(f->file), false);
    const int64_t n_ctx = f->model.ctx;
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
      throw Error("the text has " + std::to_string(tokens.size()) + " tokens; perplexity with a context of " +
                  std::to_string(n_ctx) + " needs at least " + std::to_string(2 * n_ctx));
    int64_t n_chunk = static_cast<int64_t>(tokens.size()) / n_ctx;
    if (f->chunks >= 0) n_chunk = std::min(n_chunk, f->chunks);
    const int64_t n_vocab = engine->info().n_vocab;
    const int64_t first = n_ctx / 2;
    Session session(*engine);
    double nll = 0.0;
    int64_t count = 0;
    for (int64_t c = 0; c < n_chunk; ++c) {
      const std::vector<Token> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
      const auto logits = session.logits_all(window);
      for (int64_t j = first; j < n_ctx - 1; ++j) {
        nll += nll_of(logits.data() + j * n_vocab, n_vocab, window[static_cast<size_t>(j + 1)]);
        ++count;
      }
      std::fprintf(stderr, "[%lld/%lld] running PPL = %.4f\n", static_cast<long long>(c + 1),
                   static_cast<long long>(n_chunk), std::exp(nll / static_cast<double>(count)));
    }
    std::printf("chunks = %lld, n_ctx = %lld, scored tokens = %lld\n", static_cast<long long>(n_chunk),
                static_cast<long long>(n_ctx), static_cast<long long>(count));
    std::printf("PPL = %.6f\n", std::exp(nll / static_cast<double>(count)));
  });
}

}  // namespace df::cli
