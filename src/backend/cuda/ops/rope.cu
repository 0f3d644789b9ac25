#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/rope.cuh"

namespace df::cuda {
namespace {

// Does pair i get the token position (true) or position 0 under the IMROPE text rule?
__device__ bool pair_has_position(const RopeArgs& a, int i) {
  const int total = a.sections[0] + a.sections[1] + a.sections[2] + a.sections[3];
  if (total == 0) return true;
  const int sector = i % total;
  return (sector % 3 == 0 && sector < 3 * a.sections[0]) || (sector % 3 == 1 && sector < 3 * a.sections[1]) ||
         (sector % 3 == 2 && sector < 3 * a.sections[2]);
}

constexpr int kMaxPairs = 256;  // n_rot <= 512

// One block per row: the row's cos/sin table once in shared memory, then every head.
__global__ void rope_kernel(float* x, int64_t xs, RopeArgs a, const int32_t* pos, int64_t pos0) {
  const int64_t r = blockIdx.x;
  const float p = static_cast<float>(pos ? pos[r] : pos0 + r);
  const int half = a.n_rot / 2;
  __shared__ float cs_t[kMaxPairs], sn_t[kMaxPairs];
  __shared__ bool rot_t[kMaxPairs];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    float theta = p;  // p * theta_scale^i by repeated multiplication, as ggml and the CPU backend
    for (int j = 0; j < i; ++j) theta *= a.theta_scale;
    sincosf(theta, &sn_t[i], &cs_t[i]);
    rot_t[i] = pair_has_position(a, i);
  }
  __syncthreads();
  float* xr = x + r * xs;
  for (int t = threadIdx.x; t < a.n_head * half; t += blockDim.x) {
    const int h = t / half, i = t % half;
    if (!rot_t[i]) continue;
    const float cs = cs_t[i], sn = sn_t[i];
    float* v = xr + static_cast<int64_t>(h) * a.head_dim;
    const float x0 = v[i], x1 = v[i + half];
    v[i] = x0 * cs - x1 * sn;
    v[i + half] = x0 * sn + x1 * cs;
  }
}

}  // namespace

void launch_rope_neox(float* x, int64_t x_stride, int64_t rows, const RopeArgs& a, const int32_t* pos,
                      int64_t pos0, cudaStream_t s) {
  if (rows == 0) return;
  if (a.n_rot / 2 > kMaxPairs) throw Error("cuda rope: more than 512 rotary dims");
  rope_kernel<<<static_cast<unsigned>(rows), 256, 0, s>>>(x, x_stride, a, pos, pos0);
  launch_check("rope_neox");
}

}  // namespace df::cuda
