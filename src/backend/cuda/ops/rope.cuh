// In-place NeoX rotary embedding of x [rows, n_head * head_dim] (row stride in floats): in each
// head, pair i (dims i and i + n_rot/2, i < n_rot/2) rotates by pos * theta_scale^i, where
// pos is pos[r] (device, when given) or pos0 + r. With multi-section tables (ggml's
// interleaved IMROPE rule for text: sections 0..2 carry the position, section 3 position 0)
// a pair of section 3 rotates with position 0, i.e. stays as it is.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace df::cuda {

struct RopeArgs {
  int32_t n_head = 0;
  int32_t head_dim = 0;
  int32_t n_rot = 0;
  float theta_scale = 1.0f;     // freq_base^(-2 / n_rot), computed on the host as the CPU does
  int32_t sections[4] = {0, 0, 0, 0};  // all zero: every pair carries the position
};

void launch_rope_neox(float* x, int64_t x_stride, int64_t rows, const RopeArgs& a, const int32_t* pos,
                      int64_t pos0, cudaStream_t s);

}  // namespace df::cuda
