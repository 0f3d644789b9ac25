// BackendOptions -> CudaOptions (cuda_options.h).
#include "backend/cuda/cuda_options.h"

#include <string>

#include "backend/backend_factory.h"
#include "backend/cuda/cuda_backend.h"
#include "common/error.h"

namespace df::cuda {

CudaOptions cuda_options(const BackendOptions& opt) {
  CudaOptions o;
  o.device = opt.cuda_device;
  o.fuse = opt.cuda_fuse;
  o.int8_x = !opt.cuda_mv_exact;
  o.pdl = !opt.cuda_no_pdl;
  o.lean_kernels = !opt.cuda_plain_small_kernels;
  o.moe_legacy = opt.cuda_moe_legacy;
  o.moe_warp_route = opt.cuda_moe_warp_route;
  o.float_norm_prologue = opt.cuda_float_norm_prologue;
  o.fuse_deltanet = opt.cuda_fuse_deltanet;
  o.moe_pdl = opt.cuda_moe_pdl;
  o.moe_gemm = opt.cuda_moe_gemm;
  o.copy_batch = opt.cuda_copy_batch;
  o.copy_kernels = opt.cuda_copy_kernels;
  o.gdn_prefill = opt.cuda_gdn_prefill;
  o.mv_pipe = !opt.cuda_mv_no_pipe;
  o.mv_pipe_rows = !opt.cuda_mv_no_pipe_rows;
  o.attn_v1 = opt.cuda_attn_v1;
  o.fuse_qk_attention = !opt.cuda_no_fuse_qk_attention;
  o.attn_wide = opt.cuda_attn_wide;
  o.prefill_sgemm = opt.cuda_prefill_sgemm;
  o.gemm_min_rows = opt.cuda_gemm_min_rows;
  o.moe_gemm_min_rows = opt.cuda_moe_gemm_min_rows;
  o.l2_prefetch_bytes = opt.cuda_l2_prefetch_bytes;
  o.mv_blocks_per_sm = opt.cuda_mv_blocks_per_sm;
  o.moe_pipe = opt.cuda_moe_pipe;
  o.mv_short_pipe = opt.cuda_mv_short_pipe;
  o.mv_stage_x = opt.cuda_mv_stage_x;
  o.mv_cluster = opt.cuda_mv_cluster;
  o.mv_preround = opt.cuda_mv_preround;
  o.fuse_attn_gate = !opt.cuda_no_fuse_attn_gate;
  o.moe_streamed_fused = opt.cuda_moe_streamed_fused;
  o.expert_cache_bytes = opt.cuda_expert_cache_mb > 0 ? opt.cuda_expert_cache_mb << 20 : opt.cuda_expert_cache_mb;
  o.gpu_mem_bytes = opt.cuda_gpu_mem_bytes;
  if (opt.cuda_expert_source == "auto") o.expert_source = ExpertSource::automatic;
  else if (opt.cuda_expert_source == "host") o.expert_source = ExpertSource::host;
  else if (opt.cuda_expert_source == "file") o.expert_source = ExpertSource::file;
  else throw Error("cuda: --expert-source must be auto, host or file, not '" + opt.cuda_expert_source + "'");
  return o;
}

}  // namespace df::cuda
