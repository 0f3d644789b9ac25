// `diskformer logits`: writes the logits of every prompt position after one prefill, as
// float32 little-endian, row-major [n_tokens, n_vocab].
#include <cstdio>
#include <fstream>

#include "common.h"
#include "common/error.h"

namespace df::cli {

void register_logits(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    PromptFlags prompt;
    std::string out;
    bool no_special = false;
  };
  auto f = std::make_shared<Flags>();
  f->model.quiet = false;
  auto* cmd = app.add_subcommand("logits", "write the logits of every prompt position");
  add_model_flags(*cmd, f->model);
  add_prompt_flags(*cmd, f->prompt);
  cmd->add_option("-o,--output", f->out, "output file (float32 [n_tokens, n_vocab])")->required();
  cmd->add_flag("--no-special", f->no_special, "do not parse special tokens in the prompt text");
  cmd->callback([f] {
    auto engine = load_engine(f->model);
    const auto ids = engine->tokenizer().encode(read_prompt(f->prompt), !f->no_special);
    Session session(*engine);
    const auto logits = session.logits_all(ids);
    std::ofstream out(f->out, std::ios::binary);
    if (!out) throw Error("cannot write '" + f->out + "'");
    out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (!out) throw Error("writing '" + f->out + "' failed");
    if (!f->model.quiet)
      std::fprintf(stderr, "wrote %zu x %lld logits to %s\n", ids.size(), static_cast<long long>(engine->info().n_vocab),
                   f->out.c_str());
  });
}

}  // namespace df::cli
