// The CUDA backend: device memory, one stream, and every op of backend.h over the kernels of
// ops/ (raw-pointer launchers; this class checks shapes and turns tensors into pointers and
// strides). Includes no CUDA header: model code and the CLI see only this.
//
// Weights are uploaded once and repacked into the matvec kernels' GPU layout (matvec/:
// quant bits and scales in separate 16-byte aligned planes; reserve_weights sizes one arena
// from the file; a model that does not fit is a df::Error naming the bytes needed and free).
// matmul: n <= 8 rows through matvec/ (every format; row r's result is the same bits for any
// n); more rows dequantize bounded tiles of weight rows (get_rows of the packed layout into
// scratch) and multiply them with a tiled f32 kernel. KV caches are F16 on the device,
// K and V each [capacity, kv_dim] (one row per position). No op synchronises or allocates
// (scratch grows outside graph captures only); download() is the one host read.
//
// Graphs: record(ops) captures what `ops` launches into a CUDA graph instead of running it;
// replay() launches the graph. Ops that read per-token data from device tensors (positions,
// ids) replay correctly after those tensors are re-uploaded.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace df {
class RangeReader;
}

namespace df::cudamv {
struct PackedWeight;
}

namespace df::cuda {

class CudaContext;
class OpProfiler;
class ExpertCache;
struct ExpertCacheStats;
struct ExpertStack;
struct MoeBuffers;
struct PackedWeights;

// Where a streamed expert comes from when the device cache misses it (CudaOptions::expert_source).
enum class ExpertSource {
  automatic,  // host when the model file fits in host memory with a margin, else file
  host,       // every expert repacked at load into pinned, device-mapped host memory, read in place
  file,       // no host copy: a step's missed experts read from the GGUF into cache slots
};

struct CudaOptions {
  int device = 0;
  bool fuse = true;  // false: the fused ops run as their unfused sequences (Backend's defaults)
  // Decode matvecs of Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_XS weights: x rounded to int8 blocks and
  // integer dots (cudamv::Context::int8_x); false: f32 x with the exact dequantized weights.
  bool int8_x = true;
  bool pdl = true;  // kernels launched with programmatic dependent launch (matvec/, ops/launch.cuh)
  // The decode step's small kernels, lean (default): launched with PDL (with `pdl`), the
  // attention slices merged by their last block (no merge kernel), argmax over many blocks
  // a row, the DeltaNet core in two launches (delta_net_core, with fuse_deltanet). false: as before (plain launches,
  // a merge kernel, one argmax block a row, six DeltaNet launches); the matvec keeps PDL. The
  // same bits either way.
  bool lean_kernels = true;
  bool mv_pipe = true;  // int8-x matvecs with pipelined loads (cudamv::Context::pipe)
  bool mv_pipe_rows = true;  // and so at 2..8 rows (a verify; cudamv::Context::pipe_rows)
  // Decode / verify attention (<= 16 rows) by the v1 kernel, one block per query head
  // (ops/attention.cuh), instead of the GQA kernel (ops/attention_gqa.cuh: one block per
  // key/value head serving its group). Other bits (a different summation order), for comparison.
  bool attn_v1 = false;
  // qk_norm_rope_attention of 1..8 rows in one launch (the GQA kernel with the norms, RoPE and
  // KV store folded in; the same bits as the two ops), with fuse and not attn_v1.
  bool fuse_qk_attention = true;
  // gated_qk_norm_rope_attention (qwen35's gated attention) with fuse_qk_attention: the GQA
  // launch reads the query heads from the [query | gate] projection and multiplies its output
  // by sigmoid(gate) itself (no split copy, no sigmoid_mul launch; the same bits).
  bool fuse_attn_gate = true;
  // The GQA kernel with 256 threads a block instead of 128 (the same tiles, sums and bits; the
  // first tile's loads before the query heads' work). Not yet run on a GPU: off until measured.
  bool attn_wide = false;
  // Prefill (more than 16 rows): F32 weights by FP32 cuBLAS instead of the f16 tile kernel
  // (CudaBackend::mul_packed).
  bool prefill_sgemm = true;
  // Matmuls of 9 .. gemm_min_rows rows as the matvec in launches of up to 8 rows (each reads the
  // weights once); above, the tensor-core GEMM (split-K where its tiles are few: gemm::split_k).
  // 8 (default): the GEMM from 9 rows (measured faster from 16 rows on, on an H100; at 9 rows
  // faster on a 4B, 8 % slower on a 27B). Before stop 36, 9..16 rows took a dequantized-tile
  // fallback: a 16-token prefill of a 4B took 180 ms on the H200.
  int64_t gemm_min_rows = 8;
  // matmul_id / matmul_id_swiglu (routed experts, with moe_gemm) of more than this many rows
  // through the grouped tensor-core GEMM; up to it, the grouped n <= 8 matvec. At least 8, so
  // that decode and a speculative verify (<= 8 rows) never take the GEMM (a row's bits must not
  // depend on the row count there). 8 (the GEMM from 9 rows; 16 before stop 43): on an H100 the
  // 35B-A3B shape's 12- and 16-token prompts prefilled 1.56x and 1.78x faster than by the grouped
  // matvec (docs/cuda_backend.md "Stop 43").
  int64_t moe_gemm_min_rows = 8;
  // Routed experts (weight_stack): -1 (auto): resident when every weight fits in device
  // memory, else kept in pinned host memory with a device cache of what is free; 0: always
  // resident; > 0: in host memory with a device cache of this many bytes.
  int64_t expert_cache_bytes = -1;
  // Streamed experts' second tier (expert_cache.h): pinned host copies (host), or the model
  // file itself (file: the routed ids read on the host at each MoE layer, one sync, the layer's
  // missed experts read with O_DIRECT and repacked into cache slots before its expert
  // products; decode steps then run eagerly, without CUDA graphs). automatic: host when the
  // file (an upper bound on the experts' bytes) plus a margin fits in MemAvailable, else file.
  ExpertSource expert_source = ExpertSource::automatic;
  // Device bytes this backend may use in all (0: what is free at construction). With
  // expert_cache_bytes -1: experts stream when the weights (+ 1 GiB) exceed it, and the cache
  // gets what it leaves once the dense weights, KV caches and state are allocated (less 512 MiB
  // for scratch).
  int64_t gpu_mem_bytes = 0;
  // The stop-19 MoE path: matmul_id of more than 8 rows downloads the ids and loops over the
  // experts on the host; the combine and the residual add as two launches (default: grouped
  // on the device, one launch over chunks of 8 rows per expert; the add in the combine).
  bool moe_legacy = false;
  // The MoE router as one warp per row (ops/moe.cuh MoeRouteKernel::warp, launched with PDL
  // under lean_kernels; the bits of the block kernel), unless moe_legacy. On at the engine level
  // (EngineOptions::cuda_moe_warp_route), off here for the block kernel's tests.
  bool moe_warp_route = false;
  // norm_matmuls of float weights (F32, F16, BF16: the qwen35moe router) with the norm in the
  // matvec's prologue (cudamv::MatvecFusion::float_norm; the bits of the norm kernel then the
  // matvec). On at the engine level (EngineOptions::cuda_float_norm_prologue), off here.
  bool float_norm_prologue = false;
  // The qwen35 DeltaNet core of 1..8 rows in two launches (cuda_delta_net.cu: conv + silu +
  // q/k l2 norm, delta rule + per-head norm + silu(z) gate; the bits of the six launches), with
  // fuse and lean_kernels. On at the engine level (EngineOptions::cuda_fuse_deltanet), off here.
  // The engine's whole configuration is tests/cuda/cuda_test_util.h shipped_cuda_options()
  // (cuda_options.h from runtime/backend_options.h), which the model tests run too.
  bool fuse_deltanet = false;
  // The MoE block's routed matvec launches over resident stacks (matmul_id, matmul_id_swiglu,
  // the fused expert launches; streamed experts keep plain launches: not yet checked with it)
  // and the fused block's combine + residual add with programmatic dependent launch (with pdl;
  // the combine with lean_kernels too): they wait for the previous kernel before they read the
  // routed ids. The same bits (CudaOps.MoePdlIsThePlainBits passed on the H200); on at the
  // engine level (EngineOptions::cuda_moe_pdl), off here for the plain kernels' tests.
  bool moe_pdl = false;
  // matmul_id / matmul_id_swiglu of more than moe_gemm_min_rows rows (prefill) over resident stacks of a GEMM
  // format through the grouped tensor-core GEMM (gemm/grouped.cuh: tiles of 32 slots of one
  // expert from a device table, f16 operands, f32 sums, SwiGLU in the gate/up epilogue)
  // instead of the grouped n = 8 matvec: within the GEMM's budget, not the matvec's bits.
  // Decode and verify (<= 8 rows) and streamed experts are unchanged. On at the engine level
  // (EngineOptions::cuda_moe_gemm; df_cuda_tests on the H200, pp512 2.9x), off here for the
  // tests of the grouped matvec path.
  bool moe_gemm = false;
  // copy_batch in one launch per 32 pairs (ops/copy_batch.cuh); false: a cudaMemcpy2DAsync per
  // pair (Backend::copy_batch). The same bytes either way. Off here (tests of the plain path);
  // on at the engine level since stop 29 (EngineOptions::cuda_copy_batch; measured on an H100).
  bool copy_batch = false;
  // copy (device to device) of at most kMaxCopyKernelBytes by the copy_batch kernel (one item),
  // and upload (host to device) of at most 1 KiB by a kernel that carries the bytes in its
  // parameters (ops/upload_small.cuh), instead of cudaMemcpy2DAsync / cudaMemcpyAsync: the
  // same bytes, one more kernel in the stream rather than a copy-engine transfer between two
  // kernels (a decode step's positions, a speculative cycle's ids and hidden rows). Off, here
  // and at the engine level (EngineOptions::cuda_copy_kernels): 1-2 % slower on an H100 (stop 38).
  bool copy_kernels = false;
  // gated_delta_rule of more than 16 rows without snapshots (prefill; head size 32, 64 or 128,
  // q, k, v 16-byte aligned, outside a graph capture; otherwise the token kernel): 0 the token
  // kernel (ops/delta_rule.cuh, as before), 1 the chunked f32 kernel (ops/delta_rule_chunked.cuh,
  // "v1", for comparison), 2 the tensor-core chunked kernel with tf32 operands, 3 the same with
  // 3xTF32 operands (ops/delta_rule_chunked_tc.cuh). 1..3 are not the token kernel's bits: within
  // the budgets of tests/cuda/test_cuda_gdn_chunked.cpp. On at the engine level
  // (EngineOptions::cuda_gdn_prefill), 0 here for the token kernel's tests. With 1..3 ssm_conv of
  // more than 16 rows without snapshots runs its tiled kernel (ops/ssm_conv.cuh: the same bits);
  // 0 is the DeltaNet prefill as before (the conv's token loop too).
  int gdn_prefill = 0;
  // Matvec weights prefetched into L2 before griddepcontrol.wait (cudamv::Context::set_l2_prefetch):
  // up to this many bytes a launch (0: none), and (mv_blocks_per_sm > 0) the matvec's persistent
  // grid capped at that many blocks per SM. The same bits.
  int64_t l2_prefetch_bytes = 0;
  int mv_blocks_per_sm = 0;
  // n = 1 int8-x matvecs of short rows with their loads pipelined moe_pipe / mv_short_pipe steps
  // ahead (2 or 4, Q6_K 2; 0: the format's configuration; matvec/launch.cuh short_depth), two rows
  // per warp, one part per lane: the routed experts' launches (cudamv::MatvecFusion::routed_pipe:
  // the fused block's gate/up and down, matmul_id(_swiglu) of up to 8 rows) and the other matvecs
  // whose rows have at most 64 parts (cudamv::Context::set_short_pipe: 2048 columns of Q4_K). The
  // same bits (CudaOps.MoePipeIsThePlainBits).
  int moe_pipe = 0;
  int mv_short_pipe = 0;
  // int8-x matvecs without a norm prologue stage x in shared memory by cp.async (one round trip
  // for the whole row) before rounding it (cudamv::Context::set_stage_x; MvFuse::stage_x where
  // the copy fits launch.cuh's kStageSmem). The same bits.
  bool mv_stage_x = false;
  // int8-x matvecs (not routed) launched as thread block clusters of this many blocks (2, 4 or
  // 8; <= 1: none), which round x once between them into every block's shared memory
  // (cudamv::Context::set_cluster, MvFuse::cluster). The same bits.
  int mv_cluster = 0;
  // int8-x matvecs (not routed, no cluster) whose n x cols reaches this (0: none) get x rounded
  // to int8 once, by a small kernel before them, instead of by each block of the persistent grid
  // (cudamv::Context::set_preround, MvFuse::preround_min). The same bits. 12288: a verify's
  // 3+ rows of 4096+ columns and the 27B's down projection (17408 columns) at one row (measured
  // on an H100 at stop 37: 16384 and 4096 against 0; docs/cuda_backend.md "Stop 37").
  int64_t mv_preround = 12288;
  // Streamed experts (expert_cache_bytes) take the resident stacks' decode launches: one row
  // runs the fused expert block (4 launches after the router, the shared expert as the slot
  // of id E outside the cache's tables: cudamv::MatvecFusion::extra; then the cache's three
  // use counts), and every routed launch over streamed stacks takes moe_pipe and moe_pdl
  // (misses still read host memory in place). Off: streamed stacks run the unfused ops with
  // plain, unpipelined routed launches (as before). The same bits either way
  // (CudaOps.StreamedFusedIsTheResidentBits); on at the engine level
  // (EngineOptions::cuda_moe_streamed_fused), off here for the plain kernels' tests.
  bool moe_streamed_fused = false;
};

// Per-op device times of profiled steps (CudaBackend::set_profiling).
struct OpProfileEntry {
  std::string op, shape;  // backend op; its weights' type and shape (matvecs), else empty
  int64_t calls = 0;
  double ms = 0;          // device time, summed over calls
  uint64_t bytes = 0;     // weight bytes the calls read (the packed layout), summed
};
struct OpProfile {
  int64_t steps = 0;
  double step_ms = 0;         // first op's start to the last op's end, summed over steps
  int64_t gate_timeouts = 0;  // steps whose ops were not held back until fully enqueued
  std::vector<OpProfileEntry> ops;  // by device time, largest first
};

// CUDA devices this process can use; 0 (and the reason in *why) without a driver or a GPU.
int probe_devices(std::string* why);

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaOptions& opt);
  ~CudaBackend() override;
  std::string name() const override;
  // 2048: the tensor-core GEMM is ~1.45x faster per token at 2048 rows than at 512 on the 4B
  // shapes (H200, stop 19, pp8192), for ~0.2 GB of activations on a 27B.
  int64_t default_prefill_chunk() const override { return 2048; }

  std::shared_ptr<Buffer> alloc(size_t bytes) override;
  void reserve_weights(uint64_t bytes) override;
  void weight_file(const std::string& path, const void* base, uint64_t size) override;
  bool prefault_weights() const override;
  Tensor weight(GgmlType type, int64_t cols, int64_t rows, const void* host) override;
  Tensor weight_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host) override;
  Tensor weight_rows(const Tensor& W, int64_t rows, const void* host) override {  // packed anew
    return weight(W.type, W.cols, rows, host);
  }
  Tensor weight_slots(const Tensor& W, int64_t rows, const void* host_rows,
                      std::vector<std::shared_ptr<Buffer>>& owner) override;  // packed
  void weight_set_row(const Tensor& S, int64_t row, const void* host_row) override;
  void upload(const Tensor& dst, const void* src, size_t bytes) override;
  void download(const Tensor& src, void* dst, size_t bytes) override;
  void synchronize() override;
  // Pinned host memory and an event: start() queues the copy, wait() syncs on the event.
  std::unique_ptr<HostReader> host_reader(size_t bytes) override;
  bool asynchronous() const override { return true; }

  void get_rows(const Tensor& table, const Tensor& ids, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, const Tensor& y) override;
  void matmul(const Tensor& W, const Tensor& x, const Tensor& y) override;
  void rope(const Tensor& x, const Tensor& pos, const RopeParams& p) override;
  KvCache alloc_kv_cache(int64_t n_ctx, int64_t kv_dim, GgmlType type) override;
  void kv_store(KvCache& cache, const Tensor& k, const Tensor& v, const Tensor& pos) override;
  void attention(const Tensor& q, const KvCache& cache, const Tensor& pos, const AttentionParams& p,
                 const Tensor& out) override;
  void argmax(const Tensor& logits, const Tensor& out) override;
  void argmax_ids(const Tensor& logits, const Tensor& ids, const Tensor& out) override;
  void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& x, const Tensor& y) override;
  void copy(const Tensor& src, const Tensor& dst) override;
  // One launch per 32 pairs (ops/copy_batch.cuh); overlapping pairs are an error.
  void copy_batch(std::span<const CopyPair> pairs) override;
  void unary(UnaryOp op, const Tensor& x, const Tensor& y) override;
  void sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) override;
  void softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) override;
  void l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) override;
  void ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                const Tensor& snapshots) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, float scale, const Tensor& out, const Tensor& snapshots) override;
  // MoE (moe_ops.cu). matmul_id of up to 8 rows reads the routed ids on the device (one matvec
  // launch over the slots, each slot's expert from the stack's device table: graph-safe);
  // more rows group the slots by expert on the device and run chunks of 8 rows per expert in
  // one launch (CudaOptions::moe_legacy: the ids downloaded, one launch per used expert).
  void moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids, const Tensor& weights) override;
  void matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) override;
  void matmul_id_swiglu(const Tensor& Wg, const Tensor& Wu, int64_t n_expert, const Tensor& x, const Tensor& ids,
                        const Tensor& gate, const Tensor& up) override;
  void moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                   const Tensor& out) override;
  void moe_combine_add(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                       const Tensor& out, const Tensor& x) override;
  // Decode (1..8 rows, resident stacks, a shared expert of the experts' shape): 4 launches
  // after the router (moe_ops.cu moe_experts_fused); otherwise the default's ops with the
  // matvec prologue's norm (the same bits per row).
  void moe_experts_residual(const MoeExperts& m, const Tensor& x, const Tensor& norm, float eps,
                            const Tensor& xn) override;

  // ---- fused ops (cuda_fused.cu): the matvec's norm prologue, epilogues, several matrices per
  // launch, and one kernel for q/k norm + RoPE + KV store ----
  void norm_matmuls(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn,
                    std::span<const Projection> proj) override;
  void norm_swiglu(const Tensor& x, const Tensor& norm, float eps, const Tensor& xn, const Tensor& Wg, const Tensor& Wu,
                   const Tensor& gate, const Tensor& up) override;
  void matmul_add(const Tensor& W, const Tensor& x, const Tensor& tmp, const Tensor& acc) override;
  void qk_norm_rope(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm, const Tensor& k_norm,
                    float eps, const Tensor& pos, const RopeParams& rq, const RopeParams& rk, KvCache* cache) override;
  // 1..8 rows (decode, verify), with fuse_qk_attention: one launch of the GQA attention kernel
  // that norms and rotates q and k itself and stores the rows' K and V (ops/attention_gqa.cuh;
  // the bits of qk_norm_rope then attention); otherwise the default's two ops.
  void qk_norm_rope_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                              const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                              const RopeParams& rk, KvCache& cache, const AttentionParams& p,
                              const Tensor& out) override;
  // The same launch with fuse_attn_gate: the query heads read from qg's [query | gate] heads in
  // place and the output multiplied by sigmoid(gate) there (the bits of the default's split,
  // attention and sigmoid_mul); otherwise the default's ops.
  void gated_qk_norm_rope_attention(const Tensor& qg, const Tensor& q, const Tensor& gate, const Tensor& k,
                                    const Tensor& v, const Tensor& q_norm, const Tensor& k_norm, float eps,
                                    const Tensor& pos, const RopeParams& rq, const RopeParams& rk, KvCache& cache,
                                    const AttentionParams& p, const Tensor& out) override;
  // Decode (1..8 rows, lean kernels): two launches per sequence, conv + SILU + q/k l2 norms
  // (ops/ssm_conv.cuh) and the delta rule with the head norm and the silu(z) gate in its last
  // block per value head (ops/delta_rule.cuh); otherwise the default's six ops. The same bits.
  void delta_net_core(const DeltaNetCore& a, std::span<const DeltaNetSeq> seqs) override;

  // ---- graphs ----
  std::unique_ptr<OpGraph> record(const std::function<void()>& ops) override;
  void replay(OpGraph& g) override;

  // ---- device facts for benchmarks ----
  std::string device_name() const;
  uint64_t device_memory() const;
  // Read bandwidth in bytes/s measured with a pure read kernel over `bytes` of device memory
  // (median of `reps` timed passes after a warm-up).
  double measure_read_bandwidth(size_t bytes, int reps);

  CudaContext& context() { return *ctx_; }

  // ---- per-op profile (`bench --profile`, op_profile.h) ----
  // While on, record() runs its ops eagerly and returns no graph (a session's steps then run
  // op by op), and each op of a step between profile_step_begin/end is timed by CUDA events.
  void set_profiling(bool on);
  void profile_step_begin();
  void profile_step_end();  // synchronizes
  OpProfile take_profile();

  // Whether routed experts stream through a device cache (see CudaOptions), and its
  // counters (zero when they are resident).
  bool experts_streamed() const { return streamed_; }
  ExpertCacheStats expert_cache_stats() const;
  void reset_expert_cache_stats();
  // Host downloads of routed ids so far (matmul_id of more than 8 rows; decode makes none).
  uint64_t routed_id_downloads() const;

 private:
  const cudamv::PackedWeight& packed(const Tensor& W) const;  // the GPU layout of a weight
  void matvec_rows(const cudamv::PackedWeight& W, const Tensor& x, const Tensor& y);
  const cudamv::PackedWeight* find_packed(const Tensor& W) const;  // null: not a packed weight
  // The fused GQA launch of qk_norm_rope_attention (qg null) or of its gated form (q's heads
  // and the gates from *qg); false, nothing launched, where the shapes or switches do not allow it.
  bool fused_attention(const Tensor& q, const Tensor* qg, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                       const Tensor& k_norm, float eps, const Tensor& pos, const RopeParams& rq,
                       const RopeParams& rk, KvCache& cache, const AttentionParams& p, const Tensor& out);
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<PackedWeights> weights_;
  bool fuse_ = true;
  bool lean_ = true;        // CudaOptions::lean_kernels
  bool attn_v1_ = false;    // CudaOptions::attn_v1
  bool fuse_qk_attn_ = true;  // CudaOptions::fuse_qk_attention
  bool fuse_attn_gate_ = true;  // CudaOptions::fuse_attn_gate
  bool attn_wide_ = false;    // CudaOptions::attn_wide
  bool prefill_sgemm_ = true;  // CudaOptions::prefill_sgemm
  int64_t gemm_min_rows_ = 8;  // CudaOptions::gemm_min_rows
  bool fuse_deltanet_ = false;  // CudaOptions::fuse_deltanet
  bool small_pdl_ = true;   // the small kernels launched with PDL (pdl && lean_kernels)
  std::unique_ptr<OpProfiler> prof_;  // null unless set_profiling(true)
  // y [n, W.rows] = x [n, W.cols] * W^T for dense device rows (strides in floats): matvec for
  // n <= 8, else dequantized tiles of W and the tiled f32 kernel.
  void mul_packed(const cudamv::PackedWeight& W, const float* x, int64_t x_stride, int64_t n, float* y,
                  int64_t y_stride);
  void ensure_iota(int64_t rows);
  const int32_t* host_ids(const Tensor& ids);  // the routed ids, downloaded once per routing
  // File tier (ExpertSource::file): the experts of `stacks` that `ids` route to brought into
  // cache slots before the launches that read them (the ids downloaded: a sync). lookup false:
  // a prefetch of a whole MoE block's stacks (skipped where they do not fit together).
  void bring_experts(std::initializer_list<const Tensor*> stacks, const Tensor& ids, bool lookup);
  struct WeightFile {
    std::string path;
    const uint8_t* base = nullptr;
    uint64_t size = 0;
    std::shared_ptr<RangeReader> reader;  // opened for the first streamed stack in it
  };
  bool experts_from_file() const;  // CudaOptions::expert_source, automatic resolved
  std::vector<WeightFile> weight_files_;  // weight_file(): where stacks' host pointers come from
  void check_matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y) const;
  // The device table of a stack's experts; *stack: its streamed stack, or null when resident.
  const uint8_t* const* expert_table(const Tensor& W, int64_t n_expert, const ExpertStack** stack);
  // matmul_id (Wu null) or matmul_id_swiglu (y the gate output) with the ids read on the device;
  // false (nothing launched) where the call has too many rows or non-dense rows.
  bool matmul_id_device(const Tensor& Wg, const Tensor* Wu, int64_t n_expert, const Tensor& x, const Tensor& ids,
                        const Tensor& y);
  // matmul_id of more than 8 rows with the slots grouped by expert on the device (ops/moe.cuh
  // launch_moe_group, once per routing) and one matvec launch over chunks of 8 rows; false
  // (nothing written to y) where the shapes do not allow it.
  bool moe_experts_fused(const MoeExperts& m, const Tensor& x, const Tensor& norm, float eps);
  const uint8_t* const* extended_table(const Tensor& W, const Tensor& Ws, int64_t n_expert, int64_t m);
  void expert_geometry(cudamv::PackedWeight& p, const ExpertStack* S, const Tensor& W, int64_t m) const;
  bool matmul_id_grouped(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids, const Tensor& y);
  // matmul_id / matmul_id_swiglu (Wu non-null, y the gate output) of more than gemm::kMinRows
  // rows through the grouped tensor-core GEMM with CudaOptions::moe_gemm (resident stacks);
  // false (nothing written to y) where not taken.
  bool matmul_id_gemm(const Tensor& Wg, const Tensor* Wu, int64_t n_expert, const Tensor& x, const Tensor& ids,
                      const Tensor& y);
  int32_t* moe_grouping(const Tensor& ids, int64_t n_expert, int64_t chunks);  // launch_moe_group, once per routing
  void grow_moe_scratch(void** p, size_t* have, size_t want, const char* what);
  CudaOptions opt_;
  bool streamed_ = false;                // routed experts in host memory (decided by reserve_weights)
  uint64_t free_at_start_ = 0;           // free device bytes when the backend was made
  std::unique_ptr<ExpertCache> experts_;
  std::unique_ptr<MoeBuffers> moe_;
  uint64_t i32_epoch_ = 0;  // bumped by every op that may write I32 device data
};

}  // namespace df::cuda
