// gemm.cuh's Blas: the weight dequantized slab by slab into a bounded f16 scratch
// (dequant_slab.cuh), each slab multiplied by cuBLAS (cublasGemmEx: f16 x f16, f32 accumulate
// and output) on the caller's stream.
//
// Column-major view for cuBLAS: y^T [m, n] (ld ys) = W [m, k] (row-major = col-major k x m,
// op T) x xh^T (col-major k x n, ld k).
//   rows slabs: W rows [r0, r0 + R) dequantized to [R, k]; y^T rows r0.. = slab^T xh^T.
//   cols slabs: W cols [c0, c0 + C) of every row to [m, C]; y^T (+)= slab^T xh^T[c0..] (beta 1
//   after the first slab).
//   piped rows: rows slabs in the two halves of the scratch, slab i + 1 dequantized on a side
//   stream while cuBLAS multiplies slab i (events order the halves; a graph capture sees the
//   side stream forked from and joined to the caller's).
#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/gemm/gemm.cuh"
#include "common/error.h"

namespace df::cuda::gemm {

namespace {

void blas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuda gemm (cublas) ") + what + ": " + cublasGetStatusString(st));
}
void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string("cuda gemm (cublas) ") + what + ": " + cudaGetErrorString(e));
  }
}

cudamv::PlanarView view(const cudamv::PackedWeight& W) {
  return cudamv::PlanarView{W.data, W.data + W.m_offset, W.q_row_bytes, W.m_row_bytes, W.rows, W.cols,
                            static_cast<const cudamv::DevTables*>(W.tables)};
}

bool dequant(const cudamv::PackedWeight& W, SlabRange sr, __half* out, cudaStream_t s) {
  const cudamv::PlanarView v = view(W);
  return dequant_fast(W.type, v, sr, out, s) || dequant_raw_basic(W.type, v, sr, out, s) ||
         dequant_raw_iq(W.type, v, sr, out, s);
}

}  // namespace

Blas::~Blas() {
  if (handle_) cublasDestroy(static_cast<cublasHandle_t>(handle_));
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  if (side_) cudaStreamDestroy(side_);
  cudaFree(slab_);
  cudaFree(workspace_);
}

bool Blas::ready(bool capturing) {
  if (handle_) return true;
  if (capturing) return false;  // no allocation inside a capture: the caller takes the tile kernel
  cublasHandle_t h = nullptr;
  blas_check(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  cuda_ok(cudaMalloc(&slab_, kSlabBytes), "slab scratch");
  cuda_ok(cudaMalloc(&workspace_, kWorkspaceBytes), "workspace");
  blas_check(cublasSetWorkspace(h, workspace_, kWorkspaceBytes), "cublasSetWorkspace");
  cuda_ok(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "side stream");
  for (cudaEvent_t& e : events_) cuda_ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
  return true;
}

bool Blas::sgemm(const float* W, int64_t ws, int64_t m, int64_t k, const float* x, int64_t xs, int64_t n, float* y,
                 int64_t ys, cudaStream_t s, bool capturing) {
  if (m <= 0 || n <= 0 || !ready(capturing)) return false;
  auto* h = static_cast<cublasHandle_t>(handle_);
  blas_check(cublasSetStream(h, s), "cublasSetStream");
  // y^T [m, n] (ld ys) = W (col-major k x m, ld ws, op T) x x^T (col-major k x n, ld xs)
  const float one = 1.0f, zero = 0.0f;
  blas_check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                         &one, W, static_cast<int>(ws), x, static_cast<int>(xs), &zero, y, static_cast<int>(ys)),
             "cublasSgemm");
  return true;
}

bool Blas::gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t ys, cudaStream_t s,
                bool capturing, int mode, size_t slab_bytes) {
  if (!supported(W) || n <= 0 || !ready(capturing)) return false;
  auto* h = static_cast<cublasHandle_t>(handle_);
  blas_check(cublasSetStream(h, s), "cublasSetStream");
  const int64_t m = W.rows, k = W.cols;
  const auto* x = reinterpret_cast<const __half*>(xh);
  auto* slab = static_cast<__half*>(slab_);
  if (slab_bytes == 0 || slab_bytes > kSlabBytes) slab_bytes = kSlabBytes;
  const int64_t slab_elems = static_cast<int64_t>(slab_bytes / sizeof(__half));
  if (mode == 0) mode = 1;
  const float one = 1.0f, zero = 0.0f;
  auto rows_gemm = [&](const __half* w, int64_t r0, int64_t nr) {
    blas_check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nr), static_cast<int>(n), static_cast<int>(k),
                            &one, w, CUDA_R_16F, static_cast<int>(k), x, CUDA_R_16F, static_cast<int>(k), &zero, y + r0,
                            CUDA_R_32F, static_cast<int>(ys), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  };
  if (mode == 1) {  // slabs of R whole rows
    const int64_t R = std::min(m, std::max<int64_t>(128, slab_elems / k / 128 * 128));
    for (int64_t r0 = 0; r0 < m; r0 += R) {
      const int64_t nr = std::min(R, m - r0);
      if (!dequant(W, SlabRange{r0, nr, 0, k}, slab, s)) return false;
      rows_gemm(slab, r0, nr);
    }
    return true;
  }
  if (mode == 3) {  // piped rows slabs in the two halves
    const int64_t R = std::min(m, std::max<int64_t>(128, slab_elems / 2 / k / 128 * 128));
    if (2 * R * k > static_cast<int64_t>(kSlabBytes / sizeof(__half))) return false;  // a row too long for two halves
    cudaEvent_t fork = events_[0], deq[2] = {events_[1], events_[2]}, done[2] = {events_[3], events_[4]};
    cuda_ok(cudaEventRecord(fork, s), "fork");
    cuda_ok(cudaStreamWaitEvent(side_, fork, 0), "fork wait");
    int i = 0;
    for (int64_t r0 = 0; r0 < m; r0 += R, ++i) {
      const int64_t nr = std::min(R, m - r0);
      const int b = i & 1;
      __half* half = slab + b * R * k;
      if (i >= 2) cuda_ok(cudaStreamWaitEvent(side_, done[b], 0), "slab free");
      if (!dequant(W, SlabRange{r0, nr, 0, k}, half, side_)) {
        cuda_ok(cudaEventRecord(deq[b], side_), "join");  // the side stream rejoins s before the error
        cuda_ok(cudaStreamWaitEvent(s, deq[b], 0), "join");
        return false;
      }
      cuda_ok(cudaEventRecord(deq[b], side_), "slab ready");
      cuda_ok(cudaStreamWaitEvent(s, deq[b], 0), "slab wait");
      rows_gemm(half, r0, nr);
      cuda_ok(cudaEventRecord(done[b], s), "slab done");
    }
    return true;
  }
  if (mode != 2) return false;
  // slabs of C columns of every row (C a multiple of 256: every format's block divides it)
  const int64_t C = std::min(k, std::max<int64_t>(256, slab_elems / m / 256 * 256));
  for (int64_t c0 = 0; c0 < k; c0 += C) {
    const int64_t nc = std::min(C, k - c0);
    if (!dequant(W, SlabRange{0, m, c0, nc}, slab, s)) return false;
    blas_check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n), static_cast<int>(nc),
                            &one, slab, CUDA_R_16F, static_cast<int>(nc), x + c0, CUDA_R_16F, static_cast<int>(k),
                            c0 == 0 ? &zero : &one, y, CUDA_R_32F, static_cast<int>(ys), CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
  }
  return true;
}

}  // namespace df::cuda::gemm
