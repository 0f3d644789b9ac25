// Quantized matrix-vector products and embedding row lookups on the GPU, for every weight
// format of the CPU engine (F32, F16, BF16, Q4_0 ... Q8_0, K-quants, IQ1-IQ4, TQ1_0, TQ2_0,
// Q1_0, Q2_0, MXFP4, NVFP4). A plain C++ header: the only CUDA type is cudaStream_t.
//
// Weights are repacked once at load (pack_weight) into a GPU layout: per row, a "quant plane"
// of 16-byte aligned per-element bits and a "meta plane" of the block scales, both holding
// exactly the bytes of the ggml blocks (re-ordered, never expanded to floats), so the matvec
// reads each weight byte once with 16-byte loads.
//
// Numerics: weights are dequantized inside the kernel exactly as src/quant's reference
// dequantizers do; activations stay f32 (PackedWeight::int8_x false), or are rounded to int8
// per 32 values (int8_x: integer dots, then one float per block); products are summed in a
// fixed order per output row. y[j, r] is therefore bit-identical for every n (a row of x
// gives the same result alone or batched with up to kMaxRows - 1 others) and differs from
// the f64 dot of the CPU-dequantized row by f32 rounding (NMSE ~1e-12 .. 1e-10), or with
// int8 x by the rounding of x (NMSE ~1e-5 for Gaussian x).
// get_rows is bit-exact with the CPU reference dequantizer.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>  // cudaStream_t

#include "quant/types.h"

namespace df::cudamv {

constexpr int kMaxRows = 8;  // largest n of matvec (decode and speculative verify)
constexpr size_t kMaxSmem = 200 * 1024;  // x copies above this read x from global memory (launch.cuh)

// Device-side constant tables of the IQ formats (grids, sign codes, non-linear values),
// uploaded to the current device by the constructor. No global mutable device state: each
// model (or process) owns one; it must outlive every PackedWeight packed with it.
//
// int8_x (default true): the weights packed with it multiply x rounded to int8 blocks of 32
// (llama.cpp's q8_1 rounding) with integer dots, for the formats and widths that have such
// kernels (Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_XS; cols a multiple of 32 whose 8 int8 x rows fit in
// shared memory); false: every format multiplies f32 x (the exact dequantized-weight kernels).
// pdl (default true): matvec launches with programmatic dependent launch (the weight loads
// of a launch overlap the end of the previous kernel; x is read only after it).
class Context {
 public:
  // pipe: the int8-x kernels with their loads pipelined (false: the previous loop; same bits);
  // pipe_rows: and so at n = 2..8 rows (a verify), else those n run the previous loop.
  explicit Context(bool int8_x = true, bool pdl = true, bool pipe = true,
                   bool pipe_rows = true);  // throws df::Error on a CUDA failure
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  const void* tables() const { return tables_; }  // device pointer, layout private
  bool int8_x() const { return int8_x_; }
  bool pdl() const { return pdl_; }
  bool pipe() const { return pipe_; }
  bool pipe_rows() const { return pipe_rows_; }
  // L2 prefetch of the weights packed after this call (MvFuse::l2_bytes): each launch's blocks
  // prefetch up to `bytes` of its weights (0: none) into L2 before griddepcontrol.wait, and
  // (blocks_per_sm > 0) its persistent grid takes at most that many blocks per SM. Same bits.
  void set_l2_prefetch(int64_t bytes, int blocks_per_sm = 0) { l2_bytes_ = bytes, blocks_per_sm_ = blocks_per_sm; }
  int64_t l2_prefetch_bytes() const { return l2_bytes_; }
  int blocks_per_sm() const { return blocks_per_sm_; }
  // Short rows (MvFuse::short_pipe) of the weights packed after this call: n = 1 int8-x
  // matvecs whose rows have at most 64 parts (Q4_K, IQ4_XS: 2048 columns) pipelined `depth`
  // (2 or 4; 0: the format's configuration) steps ahead, two rows per warp. Same bits.
  void set_short_pipe(int depth) { short_pipe_ = depth; }
  int short_pipe() const { return short_pipe_; }
  // int8-x launches without a norm prologue of the weights packed after this call: x staged in
  // shared memory by cp.async before it is rounded (MvFuse::stage_x, where launch.cuh's
  // kStageSmem holds the copy). Same bits.
  void set_stage_x(bool on) { stage_x_ = on; }
  bool stage_x() const { return stage_x_; }
  // int8-x launches (not routed) of the weights packed after this call as thread block clusters
  // of `blocks` (2..8; <= 1: none) that round x once between them (MvFuse::cluster). Same bits.
  void set_cluster(int blocks) { cluster_ = blocks; }
  int cluster() const { return cluster_; }
  // int8-x launches (not routed, no cluster) of the weights packed after this call whose
  // n x cols reaches `min_elems` (> 0; 0: none) have x rounded once by a small kernel before
  // them into a buffer of this context (allocated here, kMaxSmem bytes: every int8-x launch's
  // x fits) that each block copies, instead of each block rounding all of x (MvFuse::preround_min).
  // The same bytes, so the same bits. Launches on one stream (the buffer is reused in stream order).
  void set_preround(int64_t min_elems);  // throws df::Error on a CUDA failure
  int64_t preround_min() const { return preround_min_; }
  uint8_t* preround_buf() const { return preround_buf_; }

 private:
  void* tables_ = nullptr;
  bool int8_x_ = true, pdl_ = true, pipe_ = true, pipe_rows_ = true;
  int64_t l2_bytes_ = 0;
  int blocks_per_sm_ = 0;
  int short_pipe_ = 0;
  bool stage_x_ = false;
  int cluster_ = 0;
  int64_t preround_min_ = 0;
  uint8_t* preround_buf_ = nullptr;
};

// Whether a weight of this type and width gets the int8-x kernels (under Context::int8_x).
bool int8_x_supported(GgmlType type, int64_t cols);

// A weight matrix in the GPU layout. Move-only; frees its memory if it owns it.
// Shape: rows x cols, row r = output r (ggml's ne[1] = rows, ne[0] = cols).
struct PackedWeight {
  GgmlType type = GgmlType::F32;
  int64_t cols = 0, rows = 0;
  uint8_t* data = nullptr;     // device memory, packed_bytes(type, cols, rows) bytes
  size_t bytes = 0;
  size_t q_row_bytes = 0;      // quant plane: rows x q_row_bytes at data (16-byte aligned rows)
  size_t m_offset = 0;         // meta plane: rows x m_row_bytes at data + m_offset
  size_t m_row_bytes = 0;
  const void* tables = nullptr;  // Context::tables() of the packing context
  bool owns = false;           // data came from cudaMalloc in pack_weight
  bool int8_x = false;         // matvec rounds x to int8 blocks (Context::int8_x and supported)
  bool pdl = false;            // matvec launches with programmatic dependent launch (Context::pdl)
  bool pipe = false;           // int8-x matvecs with pipelined loads (Context::pipe)
  bool pipe_rows = false;      // and so at n = 2..8 (Context::pipe_rows)
  int64_t l2_prefetch = 0;     // bytes a launch prefetches into L2 first (Context::set_l2_prefetch)
  int blocks_per_sm = 0;       // > 0: the persistent grid's cap per SM (Context::set_l2_prefetch)
  int short_pipe = 0;          // n = 1 rows of <= 64 parts pipelined this deep (Context::set_short_pipe)
  bool stage_x = false;        // int8-x x staged by cp.async (Context::set_stage_x)
  int cluster = 0;             // int8-x launches as clusters of this many blocks (Context::set_cluster)
  int64_t preround_min = 0;    // x rounded once per launch from this n x cols (Context::set_preround)
  uint8_t* preround_buf = nullptr;  // ... into this buffer of the packing context (not owned)
  uint64_t* trace = nullptr;   // workbench only: where matvec_traced (variants.cuh) stamps its blocks' phases

  PackedWeight() = default;
  PackedWeight(PackedWeight&& o) noexcept { *this = static_cast<PackedWeight&&>(o); }
  PackedWeight& operator=(PackedWeight&& o) noexcept;
  PackedWeight(const PackedWeight&) = delete;
  PackedWeight& operator=(const PackedWeight&) = delete;
  ~PackedWeight();
};

// Whether matvec/get_rows handle this type (every weight format of the CPU engine).
bool supported(GgmlType type);

// Device bytes of the packed layout (to check that a model fits before allocating).
// Throws df::Error for an unsupported type or a cols that is not a multiple of the block
// size (F32/F16/BF16: cols must be a multiple of 8).
size_t packed_bytes(GgmlType type, int64_t cols, int64_t rows);

// Load-time repack. host_blocks: rows x row_bytes(type, cols) bytes of ggml blocks, as in the
// GGUF file. device_dst: packed_bytes() bytes of device memory (256-byte aligned) owned by
// the caller, or nullptr to cudaMalloc it (then the PackedWeight owns it). The upload is
// synchronous on `stream` (the host staging buffer is freed on return).
PackedWeight pack_weight(const Context& ctx, GgmlType type, int64_t cols, int64_t rows,
                         const void* host_blocks, void* device_dst = nullptr,
                         cudaStream_t stream = nullptr);

// y[j, r] = sum_c W[r, c] * x[j, c] for j < n, 1 <= n <= kMaxRows.
// x: [n, cols] f32 device, y: [n, rows] f32 device (row-major, contiguous). Asynchronous.
void matvec(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t stream);

// The fusions of one matvec launch (see mv_fuse.cuh for the kernel side). Each output is
// the bits of the unfused ops (the elementwise kernels, the one-warp-per-row rms_norm), so
// which path a launch takes never changes a result.
struct MatvecFusion {
  // More matrices over the same x: the same type and cols as W; y_more[i]: [n, more[i]->rows].
  const PackedWeight* more[2] = {nullptr, nullptr};
  float* y_more[2] = {nullptr, nullptr};
  // Per matrix (W, more[0], more[1]): 0 store, 1 y += W x, 2 y = sigmoid(W x),
  // 3 y = softplus(W x + bias) * scale (bias, scale [rows] f32 device).
  int epi[3] = {0, 0, 0};
  const float* bias[3] = {nullptr, nullptr, nullptr};
  const float* scale[3] = {nullptr, nullptr, nullptr};
  bool swiglu = false;          // y = silu(W x) * (more[0] x); more[0] the up matrix, y_more unused
  const float* norm_w = nullptr;  // x rows RMS-normed and times norm_w [cols] first
  float eps = 0.0f;
  // The float formats (F32, F16, BF16: they read x from global memory) take norm_w too, their
  // x then copied to shared memory (the same bits); false: not in one launch with norm_w.
  bool float_norm = false;
  // Routed experts: one launch over n_slots slots (n rows each), slot s running expert
  // e = ids[s] (device memory; clamped below n_expert; a negative id: slot s is skipped,
  // its y rows untouched) of the stack(s) W (and more[0]): W
  // (more[0]) gives the type, shape and row bytes of one expert, and table[0] (table[1]) the
  // planes of each expert, device memory of 2 * n_expert pointers: quant plane of expert e at
  // [e], meta plane at [n_expert + e]. n = 1: x row s / x_div, y row s; n > 1 (x_div 1):
  // x rows [s * n, s * n + n), y rows likewise (dense rows). The bits of each row are those
  // of matvec over its expert alone.
  const int32_t* ids = nullptr;
  const uint8_t* const* table[2] = {nullptr, nullptr};
  int n_slots = 0, n_expert = 0, x_div = 1;
  // Routed launches with programmatic dependent launch too (with W.pdl): each block waits for
  // the previous kernel before it reads ids, so its weight loads no longer overlap that kernel,
  // but its launch and the previous kernel's tail do. false: routed launches are plain.
  bool routed_pdl = false;
  // Routed launches of one row a slot over int8-x formats (MvFuse::routed_pipe): mv_kernel
  // with its loads `routed_pipe` steps ahead (2 or 4; Q6_K 2), two rows per warp, one part per
  // lane, across the block's row groups; 0: the format's n = 1 configuration. A slot's rows have
  // few parts (the 35B-A3B's down: 16 of Q4_K), so the default loop has a lane's one load in
  // flight per round trip. The same bits (which lane takes which parts is unchanged).
  int routed_pipe = 0;
  // The expert of id n_expert kept outside the tables (null: none; ids at or above n_expert
  // are clamped below it): extra[0] for table[0], extra[1] for table[1], each of W's (more[0]'s)
  // type, shape and row bytes. A streamed stack's shared expert (the cache rewrites the stack's
  // table, so the shared expert cannot be appended to a copy of it as for resident stacks).
  const PackedWeight* extra[2] = {nullptr, nullptr};
};

// matvec with the fusions of f in one launch; false (nothing launched) where this type and n
// cannot do them in one launch (then the caller runs the unfused ops).
bool matvec_fused(const PackedWeight& W, const float* x, float* y, int n, const MatvecFusion& f,
                  cudaStream_t stream);

// out[j, :] = dequantized row ids[j] of the table, for j < n (any n >= 0).
// ids: [n] int32 device; out: [n, cols] f32 device. An id outside [0, rows) gives a row of
// NaNs (the kernel cannot throw; the caller validates token ids on the host).
void get_rows(const PackedWeight& table, const int32_t* ids, int n, float* out,
              cudaStream_t stream);

}  // namespace df::cudamv
