// Prefill GEMM on tensor cores: y[j, r] = sum_c W[r, c] * x[j, c] for many rows j of x
// (n > kMinRows), every weight format of matvec/ over its packed GPU layout.
//
// Each block computes a 128 (rows of x) x 128 (rows of W) tile of y. Per step of 64 columns,
// the x tile (f16, converted once per call by convert_x_f16) comes in by cp.async and the
// weight tile is dequantized by the block into shared memory as f16 (each thread loads the
// 16-byte words of its parts one step ahead, in registers, and dequantizes them after the
// step's products: the format's own dequantizer of matvec/, so no format needs its own
// kernel and no float copy of a weight exists outside shared memory). Products are
// mma.sync m16n8k16 f16 x f16 with f32 accumulation.
//
// Numerics: x and the weights are rounded to f16 (relative 2^-11 each), sums in f32: the
// result differs from the f32 path by ~1e-7 NMSE per product; rows are not bit-identical to
// matvec's (decode rows stay on matvec: n <= 8 never comes here).
#pragma once
#include <cstdint>
#include <map>
#include <tuple>

#include <cuda_runtime_api.h>

#include "backend/cuda/matvec/matvec.cuh"

namespace df::cuda::gemm {

constexpr int64_t kMinRows = 16;   // the backend uses the GEMM for n > kMinRows
constexpr int64_t kColsStep = 64;  // cols of a k step of the kernel: W.cols must be a multiple

// Whether the GEMM takes this weight (type known, cols a multiple of 64).
bool supported(const cudamv::PackedWeight& W);

// xh[j, c] = f16(x[j * x_stride + c]) (saturated to +-65504) for j < n, c < k; xh dense.
// x must be 16-byte aligned with x_stride % 4 == 0 and k % 4 == 0.
void convert_x_f16(const float* x, int64_t x_stride, int64_t n, int64_t k, uint16_t* xh, cudaStream_t s);

// y[j * y_stride + r] = sum_c W[r, c] * xh[j, c] for j < n, r < W.rows. xh: dense f16
// [n, W.cols] (16-byte aligned). Throws df::Error when !supported(W).
void gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s);

// Split-K for a problem whose 64 x 64 tiles leave the GPU's sms without two blocks each (few
// weight rows at few x rows: a short prompt's prefill of a 2560-row projection has 40 tiles):
// the k steps in S ranges, S the smallest count giving every sm two blocks, at most 16, at least
// 4 steps of 64 columns a range, and the S partial outputs (S n m floats) within kSplitMaxBytes;
// 1: no split. A function of the shape and the sm count alone (no timing): the same sums on
// every run of a machine.
constexpr size_t kSplitMaxBytes = size_t{64} << 20;
int split_k(int64_t m, int64_t n, int64_t k, int sms);

// Workbench: the same with a tile configuration other than the default (codes in
// gemm_kernel.cuh: + 16 S for S-way split-K, whose S partials [S][n][W.rows] go to y with
// y_stride W.rows; split_sum adds them); false when the code is unknown.
bool gemm_variant(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride,
                  int code, cudaStream_t s);
// y[j * y_stride + r] = sum over z = 0 .. splits - 1, in that order, of part[(z n + j) m + r].
void split_sum(const float* part, int splits, int64_t n, int64_t m, float* y, int64_t y_stride, cudaStream_t s);

// The cuBLAS path (gemm_blas.cu): W dequantized to f16 a slab at a time into a scratch of
// kSlabBytes (never the whole expanded matrix when it is larger; the scratch is reused by every
// weight), each slab multiplied by cublasGemmEx (f16 x f16, f32 accumulate, f32 out: the
// numerics of the tile kernel, another summation order). One per backend: the cuBLAS handle,
// the slab and cuBLAS's workspace (allocated on the first call, on the current device).
class Blas {
 public:
  static constexpr size_t kSlabBytes = size_t{64} << 20, kWorkspaceBytes = size_t{32} << 20;
  Blas() = default;
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  // y as gemm(). mode 1: slabs of whole rows; 2: slabs of columns of every row (accumulated
  // in y); 3: slabs of rows in the two halves of the scratch, the next dequantized on a side
  // stream while the last is multiplied; 0: the default (1). slab_bytes: the scratch used
  // (0: all of kSlabBytes). False when W is not supported or, while capturing, the first
  // call has not happened yet (nothing allocated inside a capture): the caller takes gemm().
  bool gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s,
            bool capturing, int mode = 0, size_t slab_bytes = 0);
  // y[j, r] = W[r] . x[j] for an f32 matrix W [m, k] (rows w_stride floats apart) by cublasSgemm
  // on the f32 x itself (FP32 math: no f16 rounding of x or W). False when not ready.
  bool sgemm(const float* W, int64_t w_stride, int64_t m, int64_t k, const float* x, int64_t x_stride, int64_t n,
             float* y, int64_t y_stride, cudaStream_t s, bool capturing);

 private:
  bool ready(bool capturing);
  void* handle_ = nullptr;  // cublasHandle_t
  void* slab_ = nullptr;
  void* workspace_ = nullptr;
  cudaStream_t side_ = nullptr;     // dequantizes the next slab (mode 3)
  cudaEvent_t events_[5] = {};     // fork, slab ready x2, slab done x2
};

// The path per problem, picked by timing: the first call of a (type, rows, cols, rows of x
// rounded up to 64) runs every tile of the kernel and the three slab modes of Blas (each once to
// warm up, once timed: events on the stream, outside a graph capture) and keeps the fastest.
// The tiles sum a y element's products in the same order (64-column steps, the mma's fixed
// k16 order), so a pick among them changes the speed only; cuBLAS sums in its own order (the
// same f16 operands and f32 sums: ~1e-7 NMSE from the tiles). One per backend (no global
// state). Problems that split_k splits take the 64 x 64 tile split-K (no timing: another
// summation order over k ranges, the same f16 operands), its partials in a buffer of the
// tuner's (allocated outside a capture; inside one, a problem whose buffer is not there yet
// takes the unsplit path).
class Tuner {
 public:
  // Candidate codes: 1..4 the tiles (gemm_kernel.cuh), 5 Blas rows, 6 Blas columns, 7 Blas
  // piped rows. Blas is a candidate only for n > kBlasMinRows: up to one 64-row tile of x the
  // tile kernel reads each quantized weight once, while a slab is written and read back as
  // f16 (~5x the bytes of a Q8_0 weight), so the tiles win there, and those calls keep the
  // tiles' bits (a timing pick between nearly equal paths would flip them from run to run).
  static constexpr int kBlasRows = 5, kBlasCols = 6, kBlasPiped = 7, kLast = 7;
  static constexpr int64_t kBlasMinRows = 64;
  // y as gemm(); the first call of a shape runs every candidate twice (the last run leaves y).
  void gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s,
            bool capturing);
  // Blas::sgemm (no tuning: one path, FP32 numerics). False: take gemm().
  bool sgemm(const float* W, int64_t w_stride, int64_t m, int64_t k, const float* x, int64_t x_stride, int64_t n,
             float* y, int64_t y_stride, cudaStream_t s, bool capturing) {
    return blas_.sgemm(W, w_stride, m, k, x, x_stride, n, y, y_stride, s, capturing);
  }
  // The candidate picked for a shape (0 when not tuned yet; 4 + 16 S: the 64 x 64 tile's S-way
  // split-K): for the workbench and reports.
  int picked(const cudamv::PackedWeight& W, int64_t n) const;
  Tuner() = default;
  ~Tuner();
  Tuner(const Tuner&) = delete;
  Tuner& operator=(const Tuner&) = delete;

 private:
  bool run(int code, const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride,
           cudaStream_t s, bool capturing);
  std::map<std::tuple<int, int64_t, int64_t, int64_t>, int> best_;
  Blas blas_;
  float* part_ = nullptr;  // split-K partials
  size_t part_bytes_ = 0;
  int sms_ = 0;
};

}  // namespace df::cuda::gemm
