// The CPU backend: host memory, a thread pool, and the ops of backend.h over the kernels of
// quant/cpu (matrix products); attention over the KV cache lives in attention.cpp.
#pragma once
#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/expert_pages.h"
#include "backend/cpu/mapped_pages.h"
#include "backend/cpu/page_advisor.h"
#include "backend/cpu/ssm_vec.h"
#include "backend/cpu/thread_pool.h"
#include "quant/cpu/kernels.h"

namespace df::cpu {

struct CpuOptions {
  int threads = 0;         // 0: all hardware threads
  Isa isa = best_isa();    // forced instruction set (tests compare against SCALAR)
  // Row-count independence bound: in row-exact mode (Backend::set_row_exact) matrix products
  // and attention of at most this many rows (decode and speculative verify) run the
  // row-exact kernels (Kernels::gemm_exact: every row gets the one-row kernel's bits, each
  // weight block is read once for all rows), so that a row's result is the same bits whatever
  // the row count; larger calls and prefill use the multi-row tiles, whose f32 summation
  // order differs for F32/F16/BF16/Q8_0 (and matches llama.cpp's batched path).
  int exact_rows = 8;
  // Weights whose type has a load-time repacked layout on this ISA (quant/cpu/repack.h:
  // Q4_0, Q8_0, Q4_K, Q6_K on AVX-512; expert stacks too) are copied into it at load and
  // multiplied through it, in llama.cpp's repacked summation order where llama.cpp repacks
  // (Q4_0, Q4_K: other bits than off; flag --cpu-repack on|off).
  bool repack = true;
  // With repack: Q8_0 in its repacked layout too (faster prefill; one f32 chain per output,
  // not llama.cpp's 8-lane order: in the qwen35moe Q4_K_M reference test it moved a router
  // choice of gap 1.5e-4 and the logits 1.2e-3 from llama.cpp's, over the 1e-3 budget).
  // Off: Q8_0 keeps the planar kernels (llama.cpp's order) over a huge-page copy of its rows.
  bool repack_q8_0 = false;
  // Stats of the routed experts read from the model file's mapped pages (expert stacks
  // without a repacked or planar copy: repack off, or too little memory for the copy): per
  // expert matrix a matmul_id multiplies, whether its pages were resident (mincore), and the
  // time spent faulting the missing ones in before the product (CpuBackend::expert_stats;
  // flag --cpu-expert-stats / --no-cpu-expert-stats). The products' bits do not change.
  bool expert_stats = true;
  // Prefetch of the routed experts on the file's mapped pages (the same stacks as the stats):
  // as soon as a MoE block's routing is known (Backend::moe_experts_routed), the missing
  // pages of the experts its gate, up and down products will read, for all rows of the call,
  // are advised MADV_WILLNEED at once (mincore finds them; joined into runs of adjacent
  // pages), so the disk reads them while the products before them run instead of page by page
  // in the products' faults (flag --cpu-expert-prefetch / --no-cpu-expert-prefetch). With the
  // stats on too, the stats count the pages as they were at that moment and their stall is
  // the wait in the product for the advised pages. The products' bits do not change.
  bool expert_prefetch = true;
  // Forecast of the routed experts on the file's mapped pages (Backend::moe_forecast): at the
  // start of a MoE layer, before its mixer, the block's router over rms_norm of the residual
  // stream as it is then predicts the routing (the top n_used experts of each row), and the
  // missing pages of the predicted experts are advised MADV_WILLNEED by a thread of their own
  // (PageAdvisor: the op thread does not wait for the advice), so that the disk reads them
  // while the mixer runs; the routing itself then advises what was missed. Counted in
  // ExpertStats (forecast_*). Off by default; the products' bits do not change.
  bool expert_forecast = false;
  // Forecast from the drafts (MoeForecast::draft, Model::forecast_experts): with speculative
  // decoding, once a cycle's drafts are known and before its verify, every MoE block's router
  // over its norm of each verify row's token embedding predicts that row's experts, and the
  // missing pages of the predicted experts of every block are queued for the advisor's thread
  // at once, so that the disk reads the later blocks' experts while the verify runs the
  // earlier ones. Counted in ExpertStats (draft_forecast_*). Off by default; the products'
  // bits do not change.
  bool expert_draft_forecast = false;
  // ... for the first this many MoE blocks only (MoeForecast::block; 0: every block): a token's
  // embedding is the first block's residual, later ones drift from it.
  int64_t expert_draft_forecast_blocks = 0;
};

// CpuOptions::expert_stats: counters over the expert matrices matmul_id read from mapped
// stacks (all zero where every stack has a copy, or with the stats off).
struct ExpertStats {
  uint64_t mapped_stacks = 0;    // expert stacks loaded that stay on a file's mapped pages
  uint64_t lookups = 0;          // expert matrices multiplied from those stacks (one per used expert a call)
  uint64_t hits = 0;             // of those, every page resident in the page cache
  uint64_t misses = 0;           // lookups - hits: some page read from the file
  uint64_t bytes_from_disk = 0;  // pages that were not resident (each counted once a call) x the page size
  double stall_seconds = 0;      // wall time the op thread waited for those pages (steady clock)
  double check_seconds = 0;      // wall time of the residency checks (mincore): the stats' own cost
  // CpuOptions::expert_forecast (counted with or without the stats):
  uint64_t forecast_experts = 0;  // experts forecast (per call of a stack, all rows), summed
  uint64_t forecast_routed = 0;   // experts then routed in the calls that had a forecast
  uint64_t forecast_hits = 0;     // of those, forecast
  uint64_t forecast_pages = 0;    // pages the forecast queued for advice (missing when checked)
  double forecast_seconds = 0;    // op-thread time of the forecasts (router, checks, queueing): their cost
  // CpuOptions::expert_draft_forecast, the same counters for the forecasts from the drafts:
  uint64_t draft_forecasts = 0;         // forecasts made (one per MoE block a verify)
  uint64_t draft_forecast_experts = 0;  // experts forecast, summed over them
  uint64_t draft_forecast_routed = 0;   // experts then routed by the blocks' calls that had one
  uint64_t draft_forecast_hits = 0;     // of those, forecast
  uint64_t draft_forecast_pages = 0;    // pages queued for advice (missing when checked)
  double draft_forecast_seconds = 0;    // op-thread time of those forecasts
};

// MemAvailable of /proc/meminfo in bytes (free memory plus reclaimable caches, the files'
// mapped pages included); 0 where it cannot be read.
size_t available_memory();

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuOptions& opt);
  std::string name() const override;

  std::shared_ptr<Buffer> alloc(size_t bytes) override;
  Tensor weight(GgmlType type, int64_t cols, int64_t rows, const void* host) override;
  // Expert stacks stay planar (matmul_id multiplies row slices of them).
  Tensor weight_stack(GgmlType type, int64_t cols, int64_t rows, int64_t n_expert, const void* host) override;
  void upload(const Tensor& dst, const void* src, size_t bytes) override;
  void download(const Tensor& src, void* dst, size_t bytes) override;
  void synchronize() override {}
  // Remembers the file mappings the weights point into (expert stacks inside one are counted
  // by the expert stats).
  void weight_file(const std::string& path, const void* base, uint64_t size) override;
  // The engine reads every page of the model's files once after load, unless the files named by
  // weight_file() take more than the memory available then (MemAvailable): reading a file larger
  // than memory would evict what it just read and cost a whole pass over the disk at start; its
  // pages then come in as the forward touches them (the MoE experts with the expert stats' batched
  // fault-in).
  bool prefault_weights() const override;
  void set_row_exact(bool on) override { exact_rows_ = on ? exact_rows_opt_ : 0; }

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
  // Recurrent-layer ops (ssm_ops.cpp).
  void unary(UnaryOp op, const Tensor& x, const Tensor& y) override;
  void sigmoid_mul(const Tensor& gate, const Tensor& x, const Tensor& out) override;
  void softplus_scale(const Tensor& x, const Tensor& bias, const Tensor& scale, const Tensor& out) override;
  void l2_norm(const Tensor& x, int64_t group, float eps, const Tensor& y) override;
  void ssm_conv(const Tensor& x, const Tensor& state, const Tensor& w, const Tensor& y,
                const Tensor& snapshots) override;
  void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        const Tensor& state, float scale, const Tensor& out, const Tensor& snapshots) override;
  // Mixture-of-experts ops (moe_ops.cpp).
  void moe_route(const Tensor& logits, bool normalize, float scale, const Tensor& ids,
                 const Tensor& weights) override;
  void matmul_id(const Tensor& W, int64_t n_expert, const Tensor& x, const Tensor& ids,
                 const Tensor& y) override;
  void moe_combine(const Tensor& experts, const Tensor& weights, const Tensor& shared, const Tensor& gate,
                   const Tensor& out) override;
  // The smallest routing gap since reset_route_gap(): over every row moe_route ranked, the
  // router logit of its k-th chosen expert minus that of the best expert left out (a gap near
  // 0 is a near-tie: another engine's rounding may route the row to another expert; the
  // reference tests excuse such rows). Infinity when nothing was routed. Recorded only after
  // the first reset_route_gap() (a test's diagnostic: the engine's routing does no extra pass).
  float min_route_gap() const { return min_route_gap_; }
  void reset_route_gap() {
    track_route_gap_ = true;
    min_route_gap_ = std::numeric_limits<float>::infinity();
  }
  // CpuOptions::expert_prefetch and expert_forecast (expert_prefetch.cpp).
  void moe_experts_routed(const MoeExperts& m) override;
  void moe_forecast(const MoeForecast& f) override;
  bool wants_moe_forecast(bool draft) const override { return draft ? expert_draft_forecast_on_ : expert_forecast_on_; }

  int threads() const { return pool_.size(); }
  // Bytes of repacked weight copies held, planar huge-page copies included (0 with repack off).
  size_t repacked_bytes() const;
  Isa isa() const { return kernels_.isa; }
  bool expert_stats_on() const { return expert_stats_on_; }
  const ExpertStats& expert_stats() const { return expert_stats_; }
  bool expert_prefetch_on() const { return expert_prefetch_on_; }
  bool expert_forecast_on() const { return expert_forecast_on_; }
  bool expert_draft_forecast_on() const { return expert_draft_forecast_on_; }
  // Pages advised MADV_WILLNEED by the expert prefetch since load (each page once a call).
  uint64_t expert_prefetch_pages() const { return prefetch_pages_; }

 private:
  // Scratch for one matmul's prepared activations, grown on demand, reused across calls.
  uint8_t* act_scratch(size_t bytes);
  // Per-thread scratch of floats (rope tables, attention scores).
  float* thread_scratch(int thread, size_t floats);
  // Per-thread scratch of bytes (activations rounded for attention products).
  uint8_t* thread_bytes(int thread, size_t bytes);

  // Y rows = W[i0, i1) . act rows, with the row-exact kernels when 1 < n <= exact_rows_.
  void gemm_rows(GgmlType t, int64_t k, const uint8_t* W, size_t w_stride, int64_t i0, int64_t i1,
                 const uint8_t* act, size_t act_stride, int64_t n, float* Y, int64_t ldy) const;

  // The repacked copy of a weight made by weight(), by the planar data pointer; matmul uses
  // it when W is that whole weight (a view of other rows multiplies the planar rows).
  struct Repacked {
    // the matrix the copies were made of: a lookup by data pointer must match all of them (a
    // corrupt file may place two tensors of other types or strides at the same bytes)
    GgmlType type;
    int64_t cols, rows;
    size_t stride;
    // the repacked layout; null where the format keeps its planar kernels (Q8_0 without
    // repack_q8_0)
    std::shared_ptr<Buffer> buf;
    // Where some calls run the planar kernels (repack_min_rows > 1: Q4_K, Q6_K; or no layout):
    // a copy of the planar rows in huge-page memory, which one thread reads ~1.7x faster than
    // the file's mapped pages (streaming, measured under load: 18 vs 31 GB/s); else null.
    std::shared_ptr<Buffer> planar;
    // made by weight_stack (each expert's rows start a group): matmul_id multiplies through it;
    // a plain weight's copy serves matmul only (matmul_id of it equals the dense matmul of
    // each expert's view, which runs the planar rows)
    bool stack = false;
  };
  const Repacked* repacked(const Tensor& W) const;
  // Makes W's repacked copy when repack is on and W's type and row length have a layout.
  void make_repacked(const Tensor& W, bool stack);
  // Whether a call of n activation rows multiplies through rp (repack_min_rows).
  bool use_repacked(const Repacked* rp, GgmlType t, int64_t n) const;
  // Whether [p, p + bytes) lies inside a mapping named by weight_file().
  bool in_mapped_file(const void* p, size_t bytes) const;
  // The expert stats of one matmul_id over a mapped stack W of experts [m, W.cols]: the pages of
  // each used expert (ascending ids) checked with mincore, the missing ones faulted in (timed).
  void account_mapped_experts(const Tensor& W, int64_t m, const int64_t* experts, int64_t n_used);
  // The expert stats' counters over one stack's used experts: spans and their missing pages.
  void count_mapped_experts(std::span<const PageSpan> spans, const int64_t* missing);
  // Whether matmul_id's stack W with these used experts was checked and advised by the
  // prefetch (stats on): then its missing pages are faulted in here (timed) and true.
  bool finish_prefetched_experts(const Tensor& W, const int64_t* experts, int64_t n_used);
  struct PrefetchedStack;
  // Whether W's experts are multiplied from the mapped file (no repacked stack copy).
  bool stack_on_mapped_pages(const Tensor& W) const;
  // The pages of the used experts (ascending) of the stacks Ws that mincore finds missing, into
  // advise_; with checked (may be null): per stack, its spans and missing counts (the stats).
  void check_missing_experts(std::span<const Tensor* const> Ws, int64_t n_expert, std::span<const int64_t> used,
                             std::vector<PrefetchedStack>* checked);
  // advise_ advised MADV_WILLNEED, joined by address, here or (via) by that thread; returns
  // the pages advised.
  uint64_t advise_checked_experts(PageAdvisor* via);

  const Kernels& kernels_;
  bool repack_;
  bool repack_q8_0_;
  std::unordered_map<const void*, Repacked> repacked_;
  struct MappedFile {
    const uint8_t* base;
    uint64_t size;
  };
  std::vector<MappedFile> mapped_files_;  // weight_file()
  bool expert_stats_on_;                  // CpuOptions::expert_stats
  ExpertStats expert_stats_;
  std::vector<unsigned char> mincore_vec_;  // account_mapped_experts: mincore's scratch
  std::vector<PageSpan> spans_;             // and the used experts' pages
  std::vector<int64_t> missing_;            // and how many of each are missing
  bool expert_prefetch_on_;                 // CpuOptions::expert_prefetch
  uint64_t prefetch_pages_ = 0;             // expert_prefetch_pages()
  std::vector<int64_t> used_;               // moe_experts_routed: the routing's experts, ascending
  std::vector<PageSpan> advise_;            // and the pages to advise (sorted, then joined)
  std::vector<PageSpan> joined_;
  // With the stats on: per stack the prefetch checked and advised, what matmul_id then waits for
  struct PrefetchedStack {
    const void* stack = nullptr;   // the stack's data (W.data)
    std::vector<int64_t> experts;  // its used experts, ascending
    std::vector<PageSpan> spans;   // their pages (expert_page_spans)
    std::vector<int64_t> missing;  // and how many of each were missing when checked
  };
  std::vector<PrefetchedStack> prefetched_;  // the last routing's stacks (at most 3)
  bool expert_forecast_on_;                  // CpuOptions::expert_forecast
  bool expert_draft_forecast_on_;            // CpuOptions::expert_draft_forecast
  int64_t expert_draft_forecast_blocks_;     // CpuOptions::expert_draft_forecast_blocks
  // moe_forecast: per gate stack its forecast experts (ascending), until the routing compares
  // (draft: those from the drafts, apart)
  using Forecasts = std::vector<std::pair<const void*, std::vector<int64_t>>>;
  Forecasts forecasts_, draft_forecasts_;
  std::unique_ptr<PageAdvisor> advisor_;  // the forecast's advice (made with the first forecast)
  std::vector<int32_t> forecast_order_;   // moe_forecast: one row's experts by router logit
  std::vector<float> route_gaps_;         // moe_route: each row's gap (min_route_gap)
  float min_route_gap_ = std::numeric_limits<float>::infinity();
  bool track_route_gap_ = false;          // moe_route records route_gaps_ (reset_route_gap)
  const SsmVec& ssm_;
  int64_t exact_rows_opt_;  // CpuOptions::exact_rows
  int64_t exact_rows_;      // in effect: exact_rows_opt_ in row-exact mode, else 0
  ThreadPool pool_;
  std::vector<uint8_t> act_buf_;
  std::vector<uint8_t> moe_buf_;  // matmul_id: rows gathered by expert, their products
  std::vector<std::vector<float>> thread_buf_;
  std::vector<std::vector<uint8_t>> thread_bytes_;
};

}  // namespace df::cpu
