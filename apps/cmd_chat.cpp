// `diskformer chat`: interactive multi-turn chat in the terminal, streaming the answers.
// Each turn re-sends the whole conversation; the session reuses the cached prefix, so only
// the new turn is computed.
#include <cstdio>
#include <iostream>

#include "common.h"
#include "generate_flags.h"
#include "spec_flags.h"
#include "stats_report.h"

namespace df::cli {

void register_chat(CLI::App& app) {
  struct Flags {
    ModelFlags model;
    GenerateFlags gen;
    SpecFlags spec;
    std::string system;
    bool no_think = false;
    bool stats = false;
  };
  auto f = std::make_shared<Flags>();
  f->gen.n_predict = 1024;
  auto* cmd = app.add_subcommand("chat", "interactive chat (type /exit or end input to quit)");
  add_model_flags(*cmd, f->model);
  add_generate_flags(*cmd, f->gen);
  add_spec_flags(*cmd, f->spec);
  cmd->add_option("--system", f->system, "system prompt");
  cmd->add_flag("--no-think", f->no_think, "thinking off (empty think block)");
  cmd->add_flag("--stats", f->stats, "print statistics after each answer");
  cmd->callback([f] {
    auto engine = load_engine(f->model);
    const Tokenizer& tok = engine->tokenizer();
    const spec::SpecOptions so = to_spec_options(f->spec, f->gen.temp, *engine);
    Session session(*engine, spec_snapshots(so));
    std::vector<ChatMessage> messages;
    if (!f->system.empty()) messages.push_back({"system", f->system});
    const GenerateOptions opt = to_options(f->gen);
    // One speculative generator for the whole chat: the head's cache follows the session's.
    std::unique_ptr<spec::MtpGenerator> mtp;
    if (so.mode == spec::SpecMode::MTP) mtp = std::make_unique<spec::MtpGenerator>(session, opt, so);
    std::string line;
    for (;;) {
      std::fprintf(stdout, "\n> ");
      std::fflush(stdout);
      if (!std::getline(std::cin, line) || line == "/exit") break;
      if (line.empty()) continue;
      messages.push_back({"user", line});
      const auto prompt = tok.encode(chat_prompt(messages, true, !f->no_think), true);
      // Hybrid models: keep a checkpoint where the history ends. The next turn renders this
      // answer without its think block, so it diverges from the cached tokens right after
      // the assistant header and restarts from here.
      GenerateOptions turn_opt = opt;
      turn_opt.checkpoint_at = {static_cast<int64_t>(tok.encode(chat_prompt(messages, false, false), true).size())};
      if (static_cast<int64_t>(prompt.size()) >= session.n_ctx()) {
        std::fprintf(stderr, "the conversation no longer fits the context (%lld tokens); raise -c\n",
                     static_cast<long long>(session.n_ctx()));
        break;
      }
      StreamDecoder stream(tok);
      std::string answer;
      const auto on_token = [&](Token t) {
        const std::string piece = stream.push(t);
        answer += piece;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
      };
      if (mtp) {
        mtp->run(prompt, turn_opt, on_token);
        session.mark_turn_end();
      } else {
        session.generate(prompt, turn_opt, on_token);
      }
      const std::string rest = stream.flush();
      answer += rest;
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::fprintf(stdout, "\n");
      messages.push_back({"assistant", answer});
      if (f->stats) {
        print_stats(*engine, session);
        if (mtp) print_spec_stats(mtp->stats());
      }
    }
  });
}

}  // namespace df::cli
