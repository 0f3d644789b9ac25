// Backends by name: `make_backend({.device = "cpu" | "cuda" | "auto"})`. Model code never
// names a backend; the engine asks this factory for one.
//
// A CUDA backend library registers itself at build time: when the build links it, it defines
// DF_HAVE_CUDA for this file's translation unit and provides the two functions of namespace
// df::cuda below. Without it, `cuda` is answered with a clear error and `auto` is the CPU.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"

namespace df {

// Options of the CPU backend only.
struct CpuBackendOptions {
  int threads = 0;            // 0: all hardware threads
  std::string isa = "auto";   // auto | scalar | avx2 | avx512
  bool repack = true;         // load-time repacked weight layouts where this ISA has them
  bool repack_q8_0 = false;   // and Q8_0's (another summation order than llama.cpp's)
  bool expert_stats = true;   // stats of the MoE experts read from the file's mapped pages (CpuOptions::expert_stats)
  bool expert_prefetch = true;  // advise those experts' missing pages once routed (CpuOptions::expert_prefetch)
  bool expert_forecast = false;  // and the forecast ones' before the layer's mixer (CpuOptions::expert_forecast)
  bool expert_draft_forecast = false;  // and those forecast from the drafts (CpuOptions::expert_draft_forecast)
  int64_t expert_draft_forecast_blocks = 0;  // of the first N MoE blocks (0: all)
};

struct BackendOptions {
  std::string device = "auto";  // cpu | cuda | auto (CUDA when built in and a GPU is present)
  CpuBackendOptions cpu;
  int cuda_device = 0;          // GPU ordinal for `cuda`
  bool cuda_fuse = true;        // `cuda`: fused ops in fewer launches (false: unfused, to compare)
  bool cuda_mv_exact = false;   // `cuda`: decode matvecs with f32 x for every format (no int8 x)
  bool cuda_no_pdl = false;     // `cuda`: kernels without programmatic dependent launch
  bool cuda_plain_small_kernels = false;  // `cuda`: CudaOptions::lean_kernels false (to compare)
  bool cuda_moe_legacy = false; // `cuda`: the stop-19 MoE path (CudaOptions::moe_legacy)
  bool cuda_moe_warp_route = false;       // `cuda`: CudaOptions::moe_warp_route
  bool cuda_float_norm_prologue = false;  // `cuda`: CudaOptions::float_norm_prologue
  bool cuda_fuse_deltanet = false;        // `cuda`: CudaOptions::fuse_deltanet
  bool cuda_moe_pdl = false;              // `cuda`: CudaOptions::moe_pdl
  bool cuda_moe_gemm = false;             // `cuda`: CudaOptions::moe_gemm
  bool cuda_copy_batch = false;           // `cuda`: CudaOptions::copy_batch
  bool cuda_copy_kernels = false;         // `cuda`: CudaOptions::copy_kernels
  int cuda_gdn_prefill = 0;               // `cuda`: CudaOptions::gdn_prefill
  bool cuda_mv_no_pipe = false; // `cuda`: int8-x matvecs without the load pipeline (cudamv::Context::pipe)
  bool cuda_mv_no_pipe_rows = false;  // `cuda`: nor at 2..8 rows (cudamv::Context::pipe_rows)
  bool cuda_attn_v1 = false;    // `cuda`: decode attention by the v1 kernel (CudaOptions::attn_v1)
  bool cuda_no_fuse_qk_attention = false;  // `cuda`: qk_norm_rope and attention as two launches
  bool cuda_prefill_sgemm = true;  // `cuda`: CudaOptions::prefill_sgemm
  int64_t cuda_gemm_min_rows = 8;  // `cuda`: CudaOptions::gemm_min_rows
  int64_t cuda_moe_gemm_min_rows = 8;  // `cuda`: CudaOptions::moe_gemm_min_rows
  bool cuda_attn_wide = false;  // `cuda`: the GQA attention kernel with 256 threads (CudaOptions::attn_wide)
  int64_t cuda_l2_prefetch_bytes = 0;  // `cuda`: CudaOptions::l2_prefetch_bytes
  int cuda_mv_blocks_per_sm = 0;       // `cuda`: CudaOptions::mv_blocks_per_sm
  int cuda_moe_pipe = 0;               // `cuda`: CudaOptions::moe_pipe
  int cuda_mv_short_pipe = 0;          // `cuda`: CudaOptions::mv_short_pipe
  bool cuda_mv_stage_x = false;        // `cuda`: CudaOptions::mv_stage_x
  int cuda_mv_cluster = 0;             // `cuda`: CudaOptions::mv_cluster
  int64_t cuda_mv_preround = 12288;    // `cuda`: CudaOptions::mv_preround
  bool cuda_no_fuse_attn_gate = false;  // `cuda`: CudaOptions::fuse_attn_gate off
  bool cuda_moe_streamed_fused = false;  // `cuda`: CudaOptions::moe_streamed_fused
  // `cuda`: routed MoE experts. -1: resident when the weights fit, else in host memory with a
  // device cache of what is free; 0: resident; > 0: in host memory, a cache of this many MiB.
  int64_t cuda_expert_cache_mb = -1;
  // `cuda`: where streamed experts come from on a miss (CudaOptions::expert_source): "auto",
  // "host" (pinned host copies read in place) or "file" (read from the GGUF into the cache).
  std::string cuda_expert_source = "auto";
  // `cuda`: device bytes the model may use in all (0: what is free); with cuda_expert_cache_mb
  // -1, the routed experts stream when the weights do not fit in it, through a cache of the rest.
  int64_t cuda_gpu_mem_bytes = 0;
};

// Throws df::Error for an unknown device name, `cuda` in a build without the CUDA backend
// ("this build has no CUDA backend") or on a machine without a GPU ("no CUDA GPU found"),
// and an ISA this CPU lacks.
std::unique_ptr<Backend> make_backend(const BackendOptions& opt);

namespace cuda {
// Implemented by the CUDA backend library (only declared here; linked when DF_HAVE_CUDA).
int device_count();                                              // 0 when no usable GPU
std::unique_ptr<Backend> make_backend(const BackendOptions& opt);  // opt.device == "cuda"
}  // namespace cuda

}  // namespace df
