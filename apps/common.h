// Shared pieces of the CLI subcommands: options every model command takes, model loading
// with a progress bar, prompt input.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "diskformer/engine.h"

namespace df::cli {

struct ModelFlags {
  std::string model;           // -m: a file, or a stored model's name; empty: the embedded default model
  std::string store;           // --store
  std::string mtp_head;        // --mtp-head: a GGUF file or stored model name holding the MTP head
  int64_t draft_vocab = 0;     // --draft-vocab: the MTP head drafts from token ids [0, N) (0: all)
  int64_t draft_context = 0;   // --draft-context: and from the context's tokens past N, in this many slots
  std::string device = "auto";  // --device cpu | cuda | auto
  int threads = 0;             // -t (CPU backend)
  int64_t ctx = 4096;          // -c
  int64_t batch = 0;           // -b (0: the backend's default)
  std::string isa = "auto";
  std::string cpu_repack = "on";  // --cpu-repack on | off | all
  bool cpu_expert_stats = true;   // --cpu-expert-stats / --no-cpu-expert-stats
  bool cpu_expert_prefetch = true;  // --cpu-expert-prefetch / --no-cpu-expert-prefetch
  bool cpu_expert_forecast = false;  // --cpu-expert-forecast / --no-cpu-expert-forecast
  bool cpu_expert_draft_forecast = false;  // --cpu-expert-draft-forecast / --no-cpu-expert-draft-forecast
  int64_t cpu_expert_draft_forecast_blocks = 0;  // --cpu-expert-draft-forecast-blocks N
  bool kv_f32 = false;
  bool no_graphs = false;
  std::string decode_lookahead = "auto";  // --decode-lookahead off|auto|on
  bool no_fuse = false;
  bool mv_exact = false;
  bool no_pdl = false;
  bool plain_small_kernels = false;
  bool moe_legacy = false;
  bool cuda_moe_warp_route = true;       // --no-cuda-moe-warp-route: the block router
  bool cuda_float_norm_prologue = true;  // --no-cuda-float-norm-prologue
  bool cuda_fuse_deltanet = true;        // --no-cuda-fuse-deltanet: six DeltaNet launches
  bool cuda_moe_pdl = true;              // --no-cuda-moe-pdl: routed expert launches without PDL
  bool cuda_moe_gemm = true;             // --no-cuda-moe-gemm: prefill's routed experts by the grouped matvec
  bool cuda_copy_kernels = false;        // --cuda-copy-kernels: small copies / uploads by kernels
  bool cuda_copy_batch = true;           // --no-cuda-copy-batch: one copy per tensor
  std::string cuda_gdn_prefill = "3xtf32";  // --cuda-gdn-prefill token|chunked-v1|tf32|3xtf32
  bool mv_no_pipe = false;
  bool mv_no_pipe_rows = false;
  bool cuda_attn_v1 = false;
  bool cuda_fuse_qk_attention = true;
  bool cuda_attn_wide = false;
  bool cuda_l2_prefetch = false;     // --cuda-l2-prefetch / --no-cuda-l2-prefetch
  int64_t cuda_l2_prefetch_mb = 24;  // --cuda-l2-prefetch-mb
  int cuda_mv_blocks_per_sm = 0;     // --cuda-mv-blocks-per-sm
  int cuda_moe_pipe = 2;             // --cuda-moe-pipe 0|2|4
  int cuda_mv_short_pipe = 0;        // --cuda-mv-short-pipe 0|2|4
  bool cuda_mv_stage_x = false;      // --cuda-mv-stage-x / --no-cuda-mv-stage-x
  int cuda_mv_cluster = 0;           // --cuda-mv-cluster 0|2|4|8
  int64_t cuda_mv_preround = 12288;  // --cuda-mv-preround N
  int64_t cuda_gemm_min_rows = 8;    // --cuda-gemm-min-rows N
  bool cuda_fuse_attn_gate = true;   // --cuda-fuse-attn-gate / --no-cuda-fuse-attn-gate
  bool cuda_prefill_sgemm = true;    // --cuda-prefill-sgemm
  bool cuda_moe_streamed_fused = true;  // --cuda-moe-streamed-fused / --no-cuda-moe-streamed-fused
  int64_t expert_cache_mb = -1;  // --expert-cache-mb (CUDA, MoE models)
  std::string expert_source = "auto";  // --expert-source (CUDA, MoE models)
  int64_t gpu_mem = 0;           // --gpu-mem BYTES (CUDA; 0: what is free)
  int64_t checkpoint_every = 0;  // recurrent-state checkpoint every N tokens (0: none)
  int max_checkpoints = 4;
  bool quiet = false;
};

void add_model_flags(CLI::App& app, ModelFlags& f);
// The path -m names: a file, else a stored model of the store `store_dir` selects (--store,
// else $DISKFORMER_HOME, else ~/.cache/diskformer); empty: the default model's.
std::string resolve_model_path(const std::string& m, const std::string& store_dir = "");
// --store DIR, for commands that resolve models by name.
void add_store_flag(CLI::App& app, std::string& dir);
// Loads the engine, drawing a progress bar on stderr unless quiet.
std::unique_ptr<Engine> load_engine(const ModelFlags& f);

struct PromptFlags {
  std::string text;  // -p
  std::string file;  // -f
};
void add_prompt_flags(CLI::App& app, PromptFlags& p, bool required = true);
std::string read_prompt(const PromptFlags& p);
std::string read_file(const std::string& path);

// The process's CPU seconds (all threads): on a loaded machine the CPU backend's work, without
// the time slices other processes took (bench's figures beside the wall clock).
double process_cpu_seconds();

// One-line progress bar on stderr.
void progress_bar(const std::string& label, double fraction);

// Registration of each subcommand (one file each).
void register_run(CLI::App& app);
void register_chat(CLI::App& app);
void register_serve(CLI::App& app);  // apps/server/cmd_serve.cpp
void register_tokenize(CLI::App& app);
void register_logits(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_inspect(CLI::App& app);
void register_bench(CLI::App& app);
void register_pull(CLI::App& app);
void register_store_commands(CLI::App& app);  // models, rm, import

}  // namespace df::cli
