// EngineOptions -> BackendOptions (backend_options.h).
#include "runtime/backend_options.h"

namespace df {

BackendOptions backend_options(const EngineOptions& opt) {
  BackendOptions bo;
  bo.device = opt.device;
  bo.cpu = opt.cpu;
  bo.cuda_fuse = opt.fuse;
  bo.cuda_mv_exact = opt.mv_exact;
  bo.cuda_no_pdl = !opt.pdl;
  bo.cuda_plain_small_kernels = !opt.lean_kernels;
  bo.cuda_moe_legacy = opt.moe_legacy;
  bo.cuda_moe_warp_route = opt.cuda_moe_warp_route;
  bo.cuda_float_norm_prologue = opt.cuda_float_norm_prologue;
  bo.cuda_fuse_deltanet = opt.cuda_fuse_deltanet;
  bo.cuda_moe_pdl = opt.cuda_moe_pdl;
  bo.cuda_moe_gemm = opt.cuda_moe_gemm;
  bo.cuda_copy_batch = opt.cuda_copy_batch;
  bo.cuda_copy_kernels = opt.cuda_copy_kernels;
  bo.cuda_gdn_prefill = opt.cuda_gdn_prefill;
  bo.cuda_mv_no_pipe = !opt.mv_pipe;
  bo.cuda_mv_no_pipe_rows = !opt.mv_pipe_rows;
  bo.cuda_attn_v1 = opt.cuda_attn_v1;
  bo.cuda_no_fuse_qk_attention = !opt.cuda_fuse_qk_attention;
  bo.cuda_attn_wide = opt.cuda_attn_wide;
  bo.cuda_l2_prefetch_bytes = opt.cuda_l2_prefetch ? opt.cuda_l2_prefetch_mb << 20 : 0;
  bo.cuda_mv_blocks_per_sm = opt.cuda_mv_blocks_per_sm;
  bo.cuda_moe_pipe = opt.cuda_moe_pipe;
  bo.cuda_mv_short_pipe = opt.cuda_mv_short_pipe;
  bo.cuda_mv_stage_x = opt.cuda_mv_stage_x;
  bo.cuda_mv_cluster = opt.cuda_mv_cluster;
  bo.cuda_mv_preround = opt.cuda_mv_preround;
  bo.cuda_no_fuse_attn_gate = !opt.cuda_fuse_attn_gate;
  bo.cuda_prefill_sgemm = opt.cuda_prefill_sgemm;
  bo.cuda_gemm_min_rows = opt.cuda_gemm_min_rows;
  bo.cuda_moe_gemm_min_rows = opt.cuda_moe_gemm_min_rows;
  bo.cuda_moe_streamed_fused = opt.cuda_moe_streamed_fused;
  bo.cuda_expert_cache_mb = opt.expert_cache_mb;
  bo.cuda_expert_source = opt.expert_source;
  bo.cuda_gpu_mem_bytes = opt.gpu_mem_bytes;
  return bo;
}

}  // namespace df
