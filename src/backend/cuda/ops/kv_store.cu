#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/kv_store.cuh"

namespace df::cuda {
namespace {

__global__ void kv_store_kernel(const float* k, int64_t ks, const float* v, int64_t vs, int64_t kv_dim,
                                __half* K, __half* V, const int32_t* pos, int64_t pos0) {
  const int64_t r = blockIdx.y;
  const int64_t p = pos ? pos[r] : pos0 + r;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= kv_dim) return;
  K[p * kv_dim + i] = __float2half_rn(k[r * ks + i]);
  V[p * kv_dim + i] = __float2half_rn(v[r * vs + i]);
}

}  // namespace

void launch_kv_store(const float* k, int64_t k_stride, const float* v, int64_t v_stride, int64_t rows,
                     int64_t kv_dim, __half* K, __half* V, const int32_t* pos, int64_t pos0, cudaStream_t s) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>((kv_dim + 127) / 128), static_cast<unsigned>(rows));
  kv_store_kernel<<<grid, 128, 0, s>>>(k, k_stride, v, v_stride, kv_dim, K, V, pos, pos0);
  launch_check("kv_store");
}

}  // namespace df::cuda
