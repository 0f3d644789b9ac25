// `diskformer run`: generate a completion (or one chat answer with --chat) for a prompt.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "common.h"
#include "common/error.h"
#include "generate_flags.h"
#include "spec_flags.h"
#include "stats_report.h"

namespace df::cli {

void register_run(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    PromptFlags prompt;
    GenerateFlags gen;
    SpecFlags spec;
    bool chat = false;
    bool no_think = false;
    bool no_special = false;
    std::string output = "text";
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  add_model_flags(*cmd, f->model);
  add_prompt_flags(*cmd, f->prompt);
  add_generate_flags(*cmd, f->gen);
  add_spec_flags(*cmd, f->spec);
  cmd->add_flag("--chat", f->chat, "wrap the prompt as a user turn of the chat template");
  cmd->add_flag("--no-think", f->no_think, "with --chat: thinking off (empty think block)");
  cmd->add_flag("--no-special", f->no_special, "do not parse special tokens in the prompt text");
  cmd->add_option("--output", f->output, "text or json")->check(CLI::IsMember({"text", "json"}));
  cmd->callback([f] {
    auto engine = load_engine(f->model);
    const Tokenizer& tok = engine->tokenizer();
    std::string text = read_prompt(f->prompt);
    GenerateOptions gen = to_options(f->gen);
    if (f->chat) {
      const std::vector<ChatMessage> messages = {{"user", text}};
      text = chat_prompt(messages, true, !f->no_think);
      // Hybrid models: a checkpoint where the history ends, as `chat` and `serve` keep, so
      // that the three compute a chat prompt in the same chunks (the same bits).
      gen.checkpoint_at = {static_cast<int64_t>(tok.encode(chat_prompt(messages, false, false), !f->no_special).size())};
    }
    const std::vector<Token> prompt = tok.encode(text, !f->no_special);
    const spec::SpecOptions so = to_spec_options(f->spec, f->gen.temp, *engine);
    Session session(*engine, spec_snapshots(so));
    spec::SpecStats spec_stats;
    const bool json = f->output == "json";
    StreamDecoder stream(tok);
    std::string generated;
    if (!json && !f->chat) std::fwrite(text.data(), 1, text.size(), stdout);
    auto ids = spec::generate(session, prompt, gen, so, [&](Token t) {
      const std::string piece = stream.push(t);
      generated += piece;
      if (!json) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      }
      return true;
    }, &spec_stats);
    const std::string rest = stream.flush();
    generated += rest;
    if (json) {
      const Stats& st = session.stats();
      nlohmann::json out = {
          {"model", resolve_model_path(f->model.model, f->model.store)},
          {"prompt_tokens", prompt},
          {"tokens", ids},
          {"text", nlohmann::json(generated)},
          {"stats",
           {{"prompt_tokens", st.prompt_tokens},
            {"generated_tokens", st.generated_tokens},
            {"prefill_seconds", st.prefill_seconds},
            {"decode_seconds", st.decode_seconds},
            {"prefill_tokens_per_second", st.prefill_seconds > 0 ? st.prefilled_tokens / st.prefill_seconds : 0.0},
            {"decode_tokens_per_second", st.decode_seconds > 0 ? st.generated_tokens / st.decode_seconds : 0.0}}}};
      if (so.mode == spec::SpecMode::MTP) out["stats"]["spec"] = spec_json(spec_stats);
      std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::printf("\n");
    }
    if (!f->model.quiet) {
      print_stats(*engine, session);
      if (so.mode == spec::SpecMode::MTP) print_spec_stats(spec_stats);
    }
  });
}

}  // namespace df::cli
