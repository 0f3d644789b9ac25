// diskformer CLI: run, chat, serve, tokenize, logits, perplexity, inspect, bench; the model store:
// pull, models, rm, import.
#include <cstdio>
#include <exception>

#include "common.h"
#include "common/error.h"

int main(int argc, char** argv) {
  CLI::App app{"diskformer: fast local inference for Qwen3-family GGUF models"};
  app.require_subcommand(1);
  df::cli::register_run(app);
  df::cli::register_chat(app);
  df::cli::register_serve(app);
  df::cli::register_tokenize(app);
  df::cli::register_logits(app);
  df::cli::register_perplexity(app);
  df::cli::register_inspect(app);
  df::cli::register_bench(app);
  df::cli::register_pull(app);
  df::cli::register_store_commands(app);
  // CLI11 would only say "A subcommand is required" for a mistyped command.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "diskformer: unknown command '%s' (--help lists the commands)\n", argv[1]);
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\ndiskformer: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
