// gemm.cuh: the x conversion and the dispatch over the format families.
#include "backend/cuda/gemm/gemm.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/gemm/families.cuh"
#include "backend/cuda/matvec/layout.cuh"
#include "common/error.h"

namespace df::cuda::gemm {

void check_launch_gemm(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw Error(std::string("cuda ") + what + ": " + cudaGetErrorString(e));
}

namespace {

__global__ void convert_x_kernel(const float* __restrict__ x, int64_t xs, int64_t n, int64_t k, __half* __restrict__ xh) {
  const int64_t q = k / 4, total = n * q;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / q, c = (i % q) * 4;
    const float4 v = *reinterpret_cast<const float4*>(x + r * xs + c);
    auto sat = [](float f) { return fminf(fmaxf(f, -65504.0f), 65504.0f); };
    const __half2 a = __floats2half2_rn(sat(v.x), sat(v.y)), b = __floats2half2_rn(sat(v.z), sat(v.w));
    uint2 u;
    u.x = *reinterpret_cast<const uint32_t*>(&a);
    u.y = *reinterpret_cast<const uint32_t*>(&b);
    *reinterpret_cast<uint2*>(xh + r * k + c) = u;
  }
}

cudamv::PlanarView view_of(const cudamv::PackedWeight& W) {
  return cudamv::PlanarView{W.data, W.data + W.m_offset, W.q_row_bytes, W.m_row_bytes, W.rows, W.cols,
                            static_cast<const cudamv::DevTables*>(W.tables)};
}

bool run_tile(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t ys, int code,
              cudaStream_t s) {
  const cudamv::PlanarView v = view_of(W);
  const auto* x = reinterpret_cast<const __half*>(xh);
  return gemm_fast(W.type, v, x, n, y, ys, code, s) || gemm_raw_basic(W.type, v, x, n, y, ys, code, s) ||
         gemm_raw_iq(W.type, v, x, n, y, ys, code, s);
}

__global__ void split_sum_kernel(const float* __restrict__ part, int splits, int64_t n, int64_t m,
                                 float* __restrict__ y, int64_t ys) {
  const int64_t total = n * m;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float acc = part[i];
    for (int z = 1; z < splits; ++z) acc += part[static_cast<int64_t>(z) * total + i];
    y[(i / m) * ys + i % m] = acc;
  }
}

}  // namespace

int split_k(int64_t m, int64_t n, int64_t k, int sms) {
  const int64_t want = 2 * static_cast<int64_t>(sms), tiles = ((m + 63) / 64) * ((n + 63) / 64);
  if (tiles >= want || n <= 0) return 1;
  int64_t s = (want + tiles - 1) / tiles;
  s = std::min<int64_t>(s, 16);
  s = std::min<int64_t>(s, k / kColsStep / 4);
  while (s > 1 && static_cast<size_t>(s * n * m) * sizeof(float) > kSplitMaxBytes) --s;
  return s < 2 ? 1 : static_cast<int>(s);
}

void split_sum(const float* part, int splits, int64_t n, int64_t m, float* y, int64_t y_stride, cudaStream_t s) {
  const int64_t total = n * m;
  if (total <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(total / 256 + 1, 132 * 8));
  split_sum_kernel<<<blocks, 256, 0, s>>>(part, splits, n, m, y, y_stride);
  check_launch_gemm("split_sum");
}

Tuner::~Tuner() {
  if (part_) cudaFree(part_);
}

bool supported(const cudamv::PackedWeight& W) {
  return W.data && W.cols % kColsStep == 0 && W.rows > 0 && cudamv::layout_supported(W.type);
}

void convert_x_f16(const float* x, int64_t x_stride, int64_t n, int64_t k, uint16_t* xh, cudaStream_t s) {
  if (n <= 0) return;
  if (k % 4 != 0 || x_stride % 4 != 0 || (reinterpret_cast<uintptr_t>(x) & 15u) != 0)
    throw Error("cuda gemm: x must be 16-byte aligned rows of a multiple of 4 floats");
  const int64_t total = n * (k / 4);
  const unsigned blocks = static_cast<unsigned>(total / 256 + 1 < 132 * 16 ? total / 256 + 1 : 132 * 16);
  convert_x_kernel<<<blocks, 256, 0, s>>>(x, x_stride, n, k, reinterpret_cast<__half*>(xh));
  check_launch_gemm("convert_x_f16");
}

void gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, cudaStream_t s) {
  if (!supported(W)) throw Error("cuda gemm: weight not supported (cols must be a multiple of 64)");
  if (n <= 0) return;
  if (!run_tile(W, xh, n, y, y_stride, 0, s)) quant::throw_unsupported_type(W.type);
}

bool Tuner::run(int code, const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride,
               cudaStream_t s, bool capturing) {
  if (code >= kBlasRows && code <= kBlasPiped)
    return blas_.gemm(W, xh, n, y, y_stride, s, capturing, code - kBlasRows + 1);
  return run_tile(W, xh, n, y, y_stride, code, s);
}

namespace {
std::tuple<int, int64_t, int64_t, int64_t> shape_key(const cudamv::PackedWeight& W, int64_t n) {
  return std::make_tuple(static_cast<int>(W.type), W.rows, W.cols, (n + 63) / 64);
}
}  // namespace

int Tuner::picked(const cudamv::PackedWeight& W, int64_t n) const {
  if (const int sp = sms_ > 0 ? split_k(W.rows, n, W.cols, sms_) : 1;
      sp > 1 && static_cast<size_t>(sp) * static_cast<size_t>(n * W.rows) * sizeof(float) <= part_bytes_)
    return 4 + 16 * sp;
  const auto it = best_.find(shape_key(W, n));
  return it == best_.end() ? 0 : it->second;
}

void Tuner::gemm(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride,
                 cudaStream_t s, bool capturing) {
  if (!supported(W)) throw Error("cuda gemm: weight not supported (cols must be a multiple of 64)");
  if (n <= 0) return;
  // Few tiles for the GPU: split-K (a rule of the shape, not a timing pick).
  if (sms_ == 0) {
    int dev = 0;
    cudaGetDevice(&dev);
    if (cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms_ < 1) sms_ = 132;
  }
  if (const int sp = split_k(W.rows, n, W.cols, sms_); sp > 1) {
    const size_t need = static_cast<size_t>(sp) * static_cast<size_t>(n * W.rows) * sizeof(float);
    if (need > part_bytes_ && !capturing) {
      if (part_) cudaFree(part_);
      part_ = nullptr, part_bytes_ = 0;
      if (cudaMalloc(&part_, need) != cudaSuccess) {
        cudaGetLastError();
        part_ = nullptr;
      } else {
        part_bytes_ = need;
      }
    }
    if (need <= part_bytes_ && run_tile(W, xh, n, part_, W.rows, 4 + 16 * sp, s)) {
      split_sum(part_, sp, n, W.rows, y, y_stride, s);
      return;
    }
  }
  const auto key = shape_key(W, n);
  const auto it = best_.find(key);
  if (it != best_.end() || capturing) {
    // a Blas pick falls back to the default tile inside a capture before its first use
    if (it != best_.end() && run(it->second, W, xh, n, y, y_stride, s, capturing)) return;
    if (!run_tile(W, xh, n, y, y_stride, 0, s)) quant::throw_unsupported_type(W.type);
    return;
  }
  cudaEvent_t e[2];
  for (auto& ev : e)
    if (cudaEventCreate(&ev) != cudaSuccess) throw Error("cuda gemm: cudaEventCreate failed");
  int best = 0;
  float best_ms = 0.0f;
  for (int code = 1; code <= kLast; ++code) {
    if (code >= kBlasRows && n <= kBlasMinRows) break;
    if (!run(code, W, xh, n, y, y_stride, s, false)) continue;  // warm-up (module load, first allocation)
    if (cudaEventRecord(e[0], s) != cudaSuccess) throw Error("cuda gemm: cudaEventRecord failed");
    run(code, W, xh, n, y, y_stride, s, false);
    float ms = 0.0f;
    if (cudaEventRecord(e[1], s) != cudaSuccess || cudaEventSynchronize(e[1]) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e[0], e[1]) != cudaSuccess)
      throw Error("cuda gemm: timing a candidate failed");
    if (best == 0 || ms < best_ms) best = code, best_ms = ms;
  }
  cudaEventDestroy(e[0]);
  cudaEventDestroy(e[1]);
  if (best == 0) quant::throw_unsupported_type(W.type);
  best_[key] = best;
  run(best, W, xh, n, y, y_stride, s, false);  // y from the pick
}

bool gemm_variant(const cudamv::PackedWeight& W, const uint16_t* xh, int64_t n, float* y, int64_t y_stride, int code,
                  cudaStream_t s) {
  if (!supported(W) || n <= 0) return false;
  return run_tile(W, xh, n, y, y_stride, code, s);
}

}  // namespace df::cuda::gemm
