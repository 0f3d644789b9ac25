// `diskformer tokenize`: prints the token ids of a text as a JSON array. Needs only the
// tokenizer, so it also works on vocabulary-only GGUF files.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common.h"
#include "gguf/gguf.h"

namespace df::cli {

void register_tokenize(CLI::App& app) {
  struct Flags {
    std::string model;
    std::string store;
    PromptFlags prompt;
    bool no_special = false;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text as JSON");
  cmd->add_option("-m,--model", f->model, "GGUF model or vocabulary file, or a stored model name (default: the embedded model)");
  add_store_flag(*cmd, f->store);
  add_prompt_flags(*cmd, f->prompt);
  cmd->add_flag("--no-special", f->no_special, "do not parse special tokens in the text");
  cmd->callback([f] {
    auto file = gguf::File::open(resolve_model_path(f->model, f->store));
    auto tok = Tokenizer::from_gguf(*file);
    const auto ids = tok->encode(read_prompt(f->prompt), !f->no_special);
    std::printf("%s\n", nlohmann::json(ids).dump().c_str());
  });
}

}  // namespace df::cli
