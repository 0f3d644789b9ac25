// One launch for the per-token head work of an attention block: per-head RMS norm of q and
// k (weights q_norm, k_norm [head_dim]), NeoX / IMROPE rotation of both (RopeArgs of rope.cuh:
// the same angles as launch_rope_neox), and, when K is not null, the F16 KV-cache store of
// the rotated k and of v at position pos[r]. q [rows, n_head * hd], k, v [rows, n_head_kv * hd]
// (row strides in floats); q and k in place.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/ops/rope.cuh"

namespace df::cuda {

struct QkNormRopeArgs {
  float* q = nullptr;
  int64_t q_stride = 0;
  float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 0.0f;
  int32_t n_head = 0, n_head_kv = 0;
  RopeArgs rope;               // head_dim, n_rot, theta_scale, sections (n_head unused)
  const int32_t* pos = nullptr;
  __half* K = nullptr;         // [capacity, kv_dim]; null: no store
  __half* V = nullptr;
  int64_t kv_dim = 0;
};

constexpr int kQkMaxHeadDim = 256;

// pdl: ops/launch.cuh.
void launch_qk_norm_rope(const QkNormRopeArgs& a, int64_t rows, cudaStream_t s, bool pdl = false);

}  // namespace df::cuda
