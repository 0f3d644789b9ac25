#include "common.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "common/error.h"
#include "store/store.h"

namespace df::cli {

void add_model_flags(CLI::App& app, ModelFlags& f) {
  app.add_option("-m,--model", f.model, "GGUF model file or stored model name (default: the embedded default model)");
  add_store_flag(app, f.store);
  app.add_option("--mtp-head", f.mtp_head,
                 "GGUF file or stored model name holding the MTP head (blk.N.nextn.*, N = the model's layers) to "
                 "use instead of the model's own, e.g. from `pull SPEC --tensors 'blk.N.*'`");
  app.add_option("--draft-vocab", f.draft_vocab,
                 "speculative decoding: the MTP head drafts only from token ids 0..N-1 (the output projection's "
                 "first N rows: a draft step reads that share of it; BPE vocabularies number common tokens "
                 "first). The output is the model's whatever N is; fewer drafts may be accepted. 0: all (default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--draft-context", f.draft_context,
                 "speculative decoding, with --draft-vocab N: the MTP head also drafts the tokens with ids >= N "
                 "that the context holds (prompt and generated tokens; code repeats its names), kept in this many "
                 "slots (first met first kept, the oldest replaced when all are taken): a draft step reads N + "
                 "this many rows of the output projection. The output is the model's whatever it is. 0: off (default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--device", f.device, "compute device: cpu, cuda, or auto (CUDA when built in and a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  app.add_option("-t,--threads", f.threads, "CPU threads (0: all)")->check(CLI::NonNegativeNumber);
  app.add_option("-c,--ctx-size", f.ctx, "context length in tokens")->check(CLI::PositiveNumber);
  app.add_option("-b,--batch-size", f.batch, "prefill chunk in tokens (default: 512 on the CPU, 2048 on a GPU)")->check(CLI::PositiveNumber);
  app.add_option("--isa", f.isa, "CPU instruction set: auto, scalar, avx2, avx512")
      ->check(CLI::IsMember({"auto", "scalar", "avx2", "avx512"}));
  app.add_option("--cpu-repack", f.cpu_repack,
                 "CPU: copy Q4_0, Q4_K and Q6_K weights into interleaved-row layouts at load (AVX-512) for "
                 "faster decode and prefill (llama.cpp's repacked summation order; a second copy in memory) and "
                 "Q8_0's rows into huge pages: on (default); all: Q8_0 repacked too (faster prefill, another "
                 "summation order than llama.cpp's); off")
      ->check(CLI::IsMember({"on", "off", "all"}));
  app.add_flag("--cpu-expert-stats,!--no-cpu-expert-stats", f.cpu_expert_stats,
               "CPU, MoE models whose routed experts stay on the GGUF's mapped pages (--cpu-repack off, or too "
               "little memory for their copy): check each used expert's pages with mincore and fault the missing "
               "ones in before its product, timed: `bench` reports the hit rate, the bytes read from disk and the "
               "time stalled on them (default on; the same bits)");
  app.add_flag("--cpu-expert-prefetch,!--no-cpu-expert-prefetch", f.cpu_expert_prefetch,
               "CPU, the same MoE models: as soon as a layer's routing is known, ask the kernel to read the "
               "missing pages of the experts it uses (MADV_WILLNEED, all rows and the gate, up and down stacks "
               "at once) so the disk reads them ahead of the products (default on; the same bits)");
  app.add_flag("--cpu-expert-forecast,!--no-cpu-expert-forecast", f.cpu_expert_forecast,
               "CPU, the same MoE models: at the start of each MoE layer, before its mixer, predict the block's "
               "routing (its router over the residual stream as it is then) and ask the kernel to read the "
               "predicted experts' missing pages, so the disk reads them while the mixer runs (default off; the "
               "same bits; `bench` reports the forecast's recall and precision)");
  app.add_flag("--cpu-expert-draft-forecast,!--no-cpu-expert-draft-forecast", f.cpu_expert_draft_forecast,
               "CPU, the same MoE models with speculative decoding: once a cycle's drafts are known, predict "
               "every MoE layer's routing of the verify's rows from their tokens (each router over the token's "
               "embedding) and ask the kernel to read the predicted experts' missing pages before the verify "
               "starts (default off; the same bits; `bench` reports its recall and precision)");
  app.add_option("--cpu-expert-draft-forecast-blocks", f.cpu_expert_draft_forecast_blocks,
                 "with --cpu-expert-draft-forecast: forecast the first N MoE layers only (0: all; default 0)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--kv-f32", f.kv_f32, "keep the KV cache in F32 instead of F16");
  app.add_flag("--no-graphs", f.no_graphs, "run every op of a decode step eagerly (no recorded device graphs)");
  app.add_option("--decode-lookahead", f.decode_lookahead,
                 "greedy decoding (run, chat without speculation, bench's decode): queue the step that appends the "
                 "next token before the host has read it (the step reads the id on the device), so the GPU does not "
                 "wait for the host between steps; the same tokens. auto: where the backend queues work (CUDA); on: "
                 "every backend; off. Default auto. A stop the host sees only after the "
                 "queued step leaves that token consumed on hybrid (DeltaNet) models")
      ->check(CLI::IsMember({"off", "auto", "on"}));
  app.add_flag("--no-fuse", f.no_fuse, "run fused GPU ops (norm + matvec, q/k norm + RoPE, ...) as separate kernels");
  app.add_flag("--mv-exact", f.mv_exact,
               "GPU decode matvecs multiply f32 activations for every weight format (default: the quantized formats "
               "but Q4_1 round them to int8 blocks of 32, as the CPU engine rounds each format's activations, for "
               "integer dots, as llama.cpp does; the float formats and Q4_1 keep f32)");
  app.add_flag("--no-pdl", f.no_pdl,
               "GPU kernels without programmatic dependent launch (default: each may start, loading its weights, "
               "while the previous kernel finishes)");
  app.add_flag("--plain-small-kernels", f.plain_small_kernels,
               "GPU decode step's small kernels as before, to compare: plain launches (only matvecs with PDL), "
               "attention's merge as its own kernel, one argmax block a row, the DeltaNet core in six launches");
  app.add_flag("--moe-legacy", f.moe_legacy,
               "GPU MoE as in stop 19 (to compare): prefill's experts grouped on the host, one launch per expert; "
               "f32 activations for the experts; the combine and the residual add as two kernels");
  app.add_flag("--cuda-moe-warp-route,!--no-cuda-moe-warp-route", f.cuda_moe_warp_route,
               "GPU MoE router as one warp per row (default on; the block kernel's bits)");
  app.add_flag("--cuda-float-norm-prologue,!--no-cuda-float-norm-prologue", f.cuda_float_norm_prologue,
               "GPU norm_matmuls of F32/F16/BF16 weights (the qwen35moe router) with the norm in the matvec "
               "prologue (default on; the same bits)");
  app.add_flag("--cuda-fuse-deltanet,!--no-cuda-fuse-deltanet", f.cuda_fuse_deltanet,
               "GPU qwen35 DeltaNet core of 1..8 rows in two launches (default on; conv+silu+l2 norm, delta "
               "rule+norm+gate; the bits of the six launches)");
  app.add_flag("--cuda-moe-pdl,!--no-cuda-moe-pdl", f.cuda_moe_pdl,
               "GPU MoE block's routed expert launches and its combine with programmatic dependent launch (they "
               "wait for the router before reading its ids; default on; the same bits)");
  app.add_flag("--cuda-moe-gemm,!--no-cuda-moe-gemm", f.cuda_moe_gemm,
               "GPU MoE prefill (more than 16 rows): the routed experts by a grouped tensor-core GEMM (tiles of 32 "
               "slots of one expert, f16 operands, SwiGLU in the gate/up epilogue) instead of the grouped matvec "
               "(default on; within the GEMM's budget, not the matvec's bits)");
  app.add_flag("--cuda-copy-kernels,!--no-cuda-copy-kernels", f.cuda_copy_kernels,
               "GPU: device-to-device copies up to 1 MiB and host-to-device uploads up to 1 KiB (a step's positions "
               "and ids, a speculative cycle's hidden rows) by small kernels instead of cudaMemcpy transfers between "
               "kernels (the same bytes; default off: measured 1-2 % slower on an H100)");
  app.add_flag("--cuda-copy-batch,!--no-cuda-copy-batch", f.cuda_copy_batch,
               "GPU: a sequence's recurrent-state copies (zeroing, snapshot slot after a verify, checkpoints) and "
               "the gated attention's q / gate split in one launch each instead of one copy per tensor (the same "
               "bytes; default on)");
  app.add_option("--cuda-gdn-prefill", f.cuda_gdn_prefill,
                 "GPU DeltaNet prefill (more than 16 rows): the delta rule by the token kernel (token), the chunked "
                 "f32 kernel (chunked-v1), or the chunked tensor-core kernel with tf32 or 3xTF32 operands (default "
                 "3xtf32; not the token kernel's bits); all but token run the conv's tiled kernel (its bits)")
      ->check(CLI::IsMember({"token", "chunked-v1", "tf32", "3xtf32"}));
  app.add_flag("--mv-no-pipe", f.mv_no_pipe,
               "GPU int8-x matvecs without the load pipeline (the previous kernel: a chunk's loads, then its "
               "products; same bits, for comparison)");
  app.add_flag("--mv-no-pipe-rows", f.mv_no_pipe_rows,
               "GPU int8-x matvecs of 2..8 rows (a speculative verify) without the load pipeline (n = 1 keeps it; "
               "same bits, for comparison)");
  app.add_flag("--cuda-attn-v1", f.cuda_attn_v1,
               "GPU decode / verify attention by the v1 kernel (one block per query head) instead of the GQA kernel "
               "(one block per key/value head serving its query heads; other summation order, for comparison)");
  app.add_flag("--cuda-fuse-qk-attn,!--no-cuda-fuse-qk-attn", f.cuda_fuse_qk_attention,
               "GPU decode / verify (1..8 rows): the q/k norms, RoPE and KV store inside the attention launch (one "
               "launch a layer instead of two; default on; the same bits; off with --cuda-attn-v1)");
  app.add_flag("--cuda-attn-wide", f.cuda_attn_wide,
               "GPU decode / verify attention: the GQA kernel with 256 threads a block instead of 128 (the same bits; "
               "not yet measured on a GPU, off by default)");
  app.add_flag("--cuda-l2-prefetch,!--no-cuda-l2-prefetch", f.cuda_l2_prefetch,
               "GPU matvecs prefetch their weights into L2 (cp.async.bulk.prefetch) before waiting for the previous "
               "kernel, up to --cuda-l2-prefetch-mb a launch (default off; the same bits)");
  app.add_option("--cuda-l2-prefetch-mb", f.cuda_l2_prefetch_mb, "with --cuda-l2-prefetch: MiB a matvec launch prefetches (default 24)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--cuda-mv-blocks-per-sm", f.cuda_mv_blocks_per_sm,
                 "GPU matvec's persistent grid capped at this many blocks per SM (0, default: the occupancy)")
      ->check(CLI::Range(0, 64));
  app.add_option("--cuda-moe-pipe", f.cuda_moe_pipe,
                 "GPU MoE decode: the routed experts' matvecs (one row a slot) with their loads pipelined 2 or 4 "
                 "steps ahead across row groups, two rows per warp (default 2; 0: the format's loop; the same bits)")
      ->check(CLI::IsMember({0, 2, 4}));
  app.add_option("--cuda-mv-short-pipe", f.cuda_mv_short_pipe,
                 "GPU one-row int8-x matvecs whose rows have at most 64 parts (2048 columns of Q4_K) with their loads "
                 "pipelined 2 or 4 steps ahead, two rows per warp (default 0: the format's loop; the same bits)")
      ->check(CLI::IsMember({0, 2, 4}));
  app.add_flag("--cuda-mv-stage-x,!--no-cuda-mv-stage-x", f.cuda_mv_stage_x,
               "GPU int8-x matvecs without a norm prologue: x copied into shared memory in one round trip "
               "(cp.async) before it is rounded, instead of rounded from global memory in steps (default off; "
               "the same bits)");
  app.add_option("--cuda-mv-cluster", f.cuda_mv_cluster,
                 "GPU int8-x matvecs launched as thread block clusters of this many blocks, which round x to int8 "
                 "once between them (each its share, written into every block's shared memory) instead of once "
                 "per block (default 0: no clusters, each block rounds all of x; 2-8 measured slower on an H100; the same bits)")
      ->check(CLI::IsMember({0, 2, 4, 8}));
  app.add_option("--cuda-mv-preround", f.cuda_mv_preround,
                 "GPU int8-x matvecs whose rows x columns (a verify's rows times the matrix width) reach N get x "
                 "rounded to int8 once, by a small kernel before them, instead of by each of the persistent "
                 "grid's blocks (default 12288: on an H100 it took 9 % off the 27B's 4-row verify and 1 % off its "
                 "decode, and slowed the 4B's one-row matvecs of 4096-9728 columns; 0: never; the same bits)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cuda-gemm-min-rows", f.cuda_gemm_min_rows,
                 "GPU matmuls of 9..N rows (short prompts, small batches) by the matvec, up to 8 rows a launch; more "
                 "rows by the tensor-core GEMM, split over k where its tiles are few (default 8: the GEMM from 9 rows)")
      ->check(CLI::Range(int64_t{8}, int64_t{4096}));
  app.add_option("--cuda-moe-gemm-min-rows", f.cuda_moe_gemm_min_rows,
                 "GPU routed experts (qwen35moe) of 9..N rows by the grouped matvec, more rows by the grouped "
                 "tensor-core GEMM (default 8: the GEMM from 9 rows, 1.6-1.8x faster on 12-16-token prompts of "
                 "the 35B-A3B shape on an H100; decode and speculative verifies, up to 8 rows, always the matvec)")
      ->check(CLI::Range(int64_t{8}, int64_t{4096}));
  app.add_flag("--cuda-fuse-attn-gate,!--no-cuda-fuse-attn-gate", f.cuda_fuse_attn_gate,
               "GPU decode / verify of qwen35's gated attention: the attention launch reads the query heads from "
               "the [query | gate] projection and applies sigmoid(gate) to its output (no split, no gate launch; "
               "default on; the same bits)");
  app.add_flag("--cuda-prefill-sgemm,!--no-cuda-prefill-sgemm", f.cuda_prefill_sgemm,
               "GPU prefill: F32 weights (MoE routers, float models) by FP32 cuBLAS instead of the f16 tile kernel "
               "(default on)");
  app.add_flag("--cuda-moe-streamed-fused,!--no-cuda-moe-streamed-fused", f.cuda_moe_streamed_fused,
               "GPU MoE decode with streamed experts (expert cache): one row in the fused expert block, the routed "
               "launches with --cuda-moe-pipe and PDL as over resident experts (default on; the same bits)");
  app.add_option("--expert-cache-mb", f.expert_cache_mb,
                 "--device cuda, MoE models: keep the routed experts in pinned host memory and a device cache of this "
                 "many MiB (misses read from host memory in place); 0: all on the device; -1 (default): on the "
                 "device when the model fits in --gpu-mem, else a cache of what --gpu-mem leaves")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30));
  app.add_option("--expert-source", f.expert_source,
                 "--device cuda, streamed MoE experts: where a miss comes from. host: pinned host copies of every "
                 "expert, read in place over the bus; file: no host copy, the step's missed experts read from the "
                 "GGUF (O_DIRECT where the file system takes it) into cache slots (a sync per MoE layer, no CUDA "
                 "graphs); auto (default): host when the file fits in host memory with a margin, else file")
      ->check(CLI::IsMember({"auto", "host", "file"}));
  app.add_option("--gpu-mem", f.gpu_mem,
                 "--device cuda: device bytes this model may use (weights, KV cache, state, scratch, expert cache); "
                 "0 (default): what is free")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--checkpoint-every", f.checkpoint_every,
                 "hybrid models: also checkpoint the recurrent state every N tokens, for prefix reuse (0: only "
                 "at the end of each prompt and answer)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-checkpoints", f.max_checkpoints, "hybrid models: checkpoints a session keeps")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", f.quiet, "no progress bar or statistics");
}

std::string resolve_model_path(const std::string& m, const std::string& store_dir) {
  if (!m.empty()) return store::resolve_model(m, store_dir);
  for (const char* p : {DF_DEFAULT_MODEL_BUILD, DF_DEFAULT_MODEL_INSTALL})
    if (std::filesystem::exists(p)) return p;
  throw Error(std::string("the default model was not found at ") + DF_DEFAULT_MODEL_BUILD +
              " — pass -m MODEL");
}

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void progress_bar(const std::string& label, double fraction) {
  const int width = 30;
  const int filled = static_cast<int>(fraction * width + 0.5);
  std::fprintf(stderr, "\r%s [%s%s] %3d%%", label.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), static_cast<int>(fraction * 100 + 0.5));
  if (fraction >= 1.0) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

std::unique_ptr<Engine> load_engine(const ModelFlags& f) {
  EngineOptions o;
  o.model_path = resolve_model_path(f.model, f.store);
  if (!f.mtp_head.empty()) o.mtp_head_path = store::resolve_model(f.mtp_head, f.store);
  o.draft_vocab = f.draft_vocab;
  o.draft_context = f.draft_context;
  o.device = f.device;
  o.cpu.threads = f.threads;
  o.cpu.isa = f.isa;
  o.cpu.repack = f.cpu_repack != "off";
  o.cpu.repack_q8_0 = f.cpu_repack == "all";
  o.cpu.expert_stats = f.cpu_expert_stats;
  o.cpu.expert_prefetch = f.cpu_expert_prefetch;
  o.cpu.expert_forecast = f.cpu_expert_forecast;
  o.cpu.expert_draft_forecast = f.cpu_expert_draft_forecast;
  o.cpu.expert_draft_forecast_blocks = f.cpu_expert_draft_forecast_blocks;
  o.n_ctx = f.ctx;
  o.prefill_chunk = f.batch;
  o.kv_f32 = f.kv_f32;
  o.graphs = !f.no_graphs;
  o.decode_lookahead = f.decode_lookahead == "on" ? 2 : f.decode_lookahead == "auto" ? 1 : 0;
  o.fuse = !f.no_fuse;
  o.mv_exact = f.mv_exact;
  o.pdl = !f.no_pdl;
  o.lean_kernels = !f.plain_small_kernels;
  o.moe_legacy = f.moe_legacy;
  o.cuda_moe_warp_route = f.cuda_moe_warp_route;
  o.cuda_float_norm_prologue = f.cuda_float_norm_prologue;
  o.cuda_fuse_deltanet = f.cuda_fuse_deltanet;
  o.cuda_moe_pdl = f.cuda_moe_pdl;
  o.cuda_moe_gemm = f.cuda_moe_gemm;
  o.cuda_copy_batch = f.cuda_copy_batch;
  o.cuda_copy_kernels = f.cuda_copy_kernels;
  o.cuda_gdn_prefill = f.cuda_gdn_prefill == "token" ? 0 : f.cuda_gdn_prefill == "chunked-v1" ? 1
                       : f.cuda_gdn_prefill == "tf32" ? 2 : 3;
  o.mv_pipe = !f.mv_no_pipe;
  o.mv_pipe_rows = !f.mv_no_pipe_rows;
  o.cuda_attn_v1 = f.cuda_attn_v1;
  o.cuda_fuse_qk_attention = f.cuda_fuse_qk_attention;
  o.cuda_attn_wide = f.cuda_attn_wide;
  o.cuda_prefill_sgemm = f.cuda_prefill_sgemm;
  o.cuda_l2_prefetch = f.cuda_l2_prefetch;
  o.cuda_l2_prefetch_mb = f.cuda_l2_prefetch_mb;
  o.cuda_mv_blocks_per_sm = f.cuda_mv_blocks_per_sm;
  o.cuda_moe_pipe = f.cuda_moe_pipe;
  o.cuda_mv_short_pipe = f.cuda_mv_short_pipe;
  o.cuda_mv_stage_x = f.cuda_mv_stage_x;
  o.cuda_mv_cluster = f.cuda_mv_cluster;
  o.cuda_mv_preround = f.cuda_mv_preround;
  o.cuda_gemm_min_rows = f.cuda_gemm_min_rows;
  o.cuda_moe_gemm_min_rows = f.cuda_moe_gemm_min_rows;
  o.cuda_fuse_attn_gate = f.cuda_fuse_attn_gate;
  o.cuda_moe_streamed_fused = f.cuda_moe_streamed_fused;
  o.expert_cache_mb = f.expert_cache_mb;
  o.expert_source = f.expert_source;
  o.gpu_mem_bytes = f.gpu_mem;
  o.checkpoint_every = f.checkpoint_every;
  o.max_checkpoints = f.max_checkpoints;
  if (!f.quiet) {
    if (::isatty(STDERR_FILENO) != 0) {
      o.on_progress = [](double x) { progress_bar("loading", x); };
    } else {
      // Not a terminal (a log file): one line at each quarter instead of a redrawn bar.
      auto last = std::make_shared<int>(-1);
      o.on_progress = [last](double x) {
        const int quarter = static_cast<int>(x * 4.0);
        if (quarter <= *last) return;
        *last = quarter;
        std::fprintf(stderr, "loading %d%%\n", quarter * 25);
      };
    }
  }
  return Engine::load(o);
}

void add_prompt_flags(CLI::App& app, PromptFlags& p, bool required) {
  auto* g = app.add_option_group("prompt");
  g->add_option("-p,--prompt", p.text, "prompt text");
  g->add_option("-f,--file", p.file, "read the prompt from a file");
  if (required) {
    g->require_option(1);
  } else {
    g->require_option(0, 1);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string read_prompt(const PromptFlags& p) { return p.file.empty() ? p.text : read_file(p.file); }

}  // namespace df::cli
