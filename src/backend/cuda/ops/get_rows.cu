#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/get_rows.cuh"

namespace df::cuda {
namespace {

__global__ void gather_kernel(const float* x, int64_t xs, int64_t rows, int64_t cols, const int32_t* ids, float* out,
                              int64_t os) {
  const int32_t id = ids[blockIdx.x];
  float* o = out + static_cast<int64_t>(blockIdx.x) * os;
  const bool ok = id >= 0 && id < rows;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] = ok ? x[id * xs + c] : __int_as_float(0x7fc00000);
}

}  // namespace

void launch_gather_rows_f32(const float* x, int64_t x_stride, int64_t rows, int64_t cols, const int32_t* ids,
                            int64_t n, float* out, int64_t out_stride, cudaStream_t s) {
  if (n == 0) return;
  gather_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(x, x_stride, rows, cols, ids, out, out_stride);
  launch_check("gather_rows");
}

}  // namespace df::cuda
