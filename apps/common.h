// Shared pieces of the CLI subcommands: options every model command takes, model loading
// with a progress bar, prompt input.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "diskformer/engine.h"

namespace df::cli {

// The library's defaults (EngineOptions{}): every flag below starts from them, so that the CLI
// runs what an engine built with default options runs (one place sets each default).
inline const EngineOptions& engine_defaults() {
  static const EngineOptions d;
  return d;
}
// The words of the flags whose values are words: load_engine's inverse mappings.
inline std::string cpu_repack_word(const CpuBackendOptions& c) {
  return !c.repack ? "off" : c.repack_q8_0 ? "all" : "on";
}
inline std::string lookahead_word(int v) { return v >= 2 ? "on" : v == 1 ? "auto" : "off"; }
inline std::string gdn_prefill_word(int v) {
  return v == 0 ? "token" : v == 1 ? "chunked-v1" : v == 2 ? "tf32" : "3xtf32";
}

struct ModelFlags {
  std::string model;           // -m: a file, or a stored model's name; empty: the embedded default model
  std::string store;           // --store
  std::string mtp_head;        // --mtp-head: a GGUF file or stored model name holding the MTP head
  // --draft-vocab: the MTP head drafts from token ids [0, N) (0: all)
  int64_t draft_vocab = engine_defaults().draft_vocab;
  // --draft-context: and from the context's tokens past N, in this many slots
  int64_t draft_context = engine_defaults().draft_context;
  std::string device = engine_defaults().device;  // --device cpu | cuda | auto
  int threads = engine_defaults().cpu.threads;  // -t (CPU backend)
  int64_t ctx = engine_defaults().n_ctx;  // -c
  int64_t batch = engine_defaults().prefill_chunk;  // -b (0: the backend's default)
  std::string isa = engine_defaults().cpu.isa;
  std::string cpu_repack = cpu_repack_word(engine_defaults().cpu);  // --cpu-repack on | off | all
  bool cpu_expert_stats = engine_defaults().cpu.expert_stats;  // --cpu-expert-stats / --no-cpu-expert-stats
  // --cpu-expert-prefetch / --no-cpu-expert-prefetch
  bool cpu_expert_prefetch = engine_defaults().cpu.expert_prefetch;
  // --cpu-expert-forecast / --no-cpu-expert-forecast
  bool cpu_expert_forecast = engine_defaults().cpu.expert_forecast;
  // --cpu-expert-draft-forecast / --no-cpu-expert-draft-forecast
  bool cpu_expert_draft_forecast = engine_defaults().cpu.expert_draft_forecast;
  // --cpu-expert-draft-forecast-blocks N
  int64_t cpu_expert_draft_forecast_blocks = engine_defaults().cpu.expert_draft_forecast_blocks;
  bool kv_f32 = engine_defaults().kv_f32;
  bool no_graphs = !engine_defaults().graphs;
  // --decode-lookahead off|auto|on
  std::string decode_lookahead = lookahead_word(engine_defaults().decode_lookahead);
  bool no_fuse = !engine_defaults().fuse;
  bool mv_exact = engine_defaults().mv_exact;
  bool no_pdl = !engine_defaults().pdl;
  bool plain_small_kernels = !engine_defaults().lean_kernels;
  bool moe_legacy = engine_defaults().moe_legacy;
  // --no-cuda-moe-warp-route: the block router
  bool cuda_moe_warp_route = engine_defaults().cuda_moe_warp_route;
  // --no-cuda-float-norm-prologue
  bool cuda_float_norm_prologue = engine_defaults().cuda_float_norm_prologue;
  // --no-cuda-fuse-deltanet: six DeltaNet launches
  bool cuda_fuse_deltanet = engine_defaults().cuda_fuse_deltanet;
  // --no-cuda-moe-pdl: routed expert launches without PDL
  bool cuda_moe_pdl = engine_defaults().cuda_moe_pdl;
  // --no-cuda-moe-gemm: prefill's routed experts by the grouped matvec
  bool cuda_moe_gemm = engine_defaults().cuda_moe_gemm;
  // --cuda-copy-kernels: small copies / uploads by kernels
  bool cuda_copy_kernels = engine_defaults().cuda_copy_kernels;
  // --no-cuda-copy-batch: one copy per tensor
  bool cuda_copy_batch = engine_defaults().cuda_copy_batch;
  // --cuda-gdn-prefill token|chunked-v1|tf32|3xtf32
  std::string cuda_gdn_prefill = gdn_prefill_word(engine_defaults().cuda_gdn_prefill);
  bool mv_no_pipe = !engine_defaults().mv_pipe;
  bool mv_no_pipe_rows = !engine_defaults().mv_pipe_rows;
  bool cuda_attn_v1 = engine_defaults().cuda_attn_v1;
  bool cuda_fuse_qk_attention = engine_defaults().cuda_fuse_qk_attention;
  bool cuda_attn_wide = engine_defaults().cuda_attn_wide;
  // --cuda-l2-prefetch / --no-cuda-l2-prefetch
  bool cuda_l2_prefetch = engine_defaults().cuda_l2_prefetch;
  int64_t cuda_l2_prefetch_mb = engine_defaults().cuda_l2_prefetch_mb;  // --cuda-l2-prefetch-mb
  int cuda_mv_blocks_per_sm = engine_defaults().cuda_mv_blocks_per_sm;  // --cuda-mv-blocks-per-sm
  int cuda_moe_pipe = engine_defaults().cuda_moe_pipe;  // --cuda-moe-pipe 0|2|4
  int cuda_mv_short_pipe = engine_defaults().cuda_mv_short_pipe;  // --cuda-mv-short-pipe 0|2|4
  bool cuda_mv_stage_x = engine_defaults().cuda_mv_stage_x;  // --cuda-mv-stage-x / --no-cuda-mv-stage-x
  int cuda_mv_cluster = engine_defaults().cuda_mv_cluster;  // --cuda-mv-cluster 0|2|4|8
  int64_t cuda_mv_preround = engine_defaults().cuda_mv_preround;  // --cuda-mv-preround N
  int64_t cuda_gemm_min_rows = engine_defaults().cuda_gemm_min_rows;  // --cuda-gemm-min-rows N
  int64_t cuda_moe_gemm_min_rows = engine_defaults().cuda_moe_gemm_min_rows;  // --cuda-moe-gemm-min-rows N
  // --cuda-fuse-attn-gate / --no-cuda-fuse-attn-gate
  bool cuda_fuse_attn_gate = engine_defaults().cuda_fuse_attn_gate;
  bool cuda_prefill_sgemm = engine_defaults().cuda_prefill_sgemm;  // --cuda-prefill-sgemm
  // --cuda-moe-streamed-fused / --no-cuda-moe-streamed-fused
  bool cuda_moe_streamed_fused = engine_defaults().cuda_moe_streamed_fused;
  int64_t expert_cache_mb = engine_defaults().expert_cache_mb;  // --expert-cache-mb (CUDA, MoE models)
  std::string expert_source = engine_defaults().expert_source;  // --expert-source (CUDA, MoE models)
  int64_t gpu_mem = engine_defaults().gpu_mem_bytes;  // --gpu-mem BYTES (CUDA; 0: what is free)
  // recurrent-state checkpoint every N tokens (0: none)
  int64_t checkpoint_every = engine_defaults().checkpoint_every;
  int max_checkpoints = engine_defaults().max_checkpoints;
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
