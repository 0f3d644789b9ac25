// Shared pieces of the CLI subcommands: options every model command takes, model loading
// with a progress bar, prompt input.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "diskformer/engine.h"

namespace df::cli {

struct ModelFlags {
  std::string model;           // -m; empty: the embedded default model
  std::string device = "auto";  // --device cpu | cuda | auto
  int threads = 0;             // -t (CPU backend)
  int64_t ctx = 4096;          // -c
  int64_t batch = 512;         // -b
  std::string isa = "auto";
  bool kv_f32 = false;
  int64_t checkpoint_every = 0;  // recurrent-state checkpoint every N tokens (0: none)
  int max_checkpoints = 4;
  bool quiet = false;
};

void add_model_flags(CLI::App& app, ModelFlags& f);
// The path -m names, or the default model's.
std::string resolve_model_path(const std::string& m);
// Loads the engine, drawing a progress bar on stderr unless quiet.
std::unique_ptr<Engine> load_engine(const ModelFlags& f);

struct PromptFlags {
  std::string text;  // -p
  std::string file;  // -f
};
void add_prompt_flags(CLI::App& app, PromptFlags& p, bool required = true);
std::string read_prompt(const PromptFlags& p);
std::string read_file(const std::string& path);

// One-line progress bar on stderr.
void progress_bar(const std::string& label, double fraction);

// Registration of each subcommand (one file each).
void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_tokenize(CLI::App& app);
void register_logits(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_inspect(CLI::App& app);
void register_bench(CLI::App& app);

}  // namespace df::cli
