#include "backend/cuda/matvec/pack_row.cuh"

#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/matvec/layout.cuh"
#include "common/error.h"

namespace df::cudamv {

void pack_row(const PackedWeight& W, int64_t row, const void* host_row, cudaStream_t stream) {
  if (row < 0 || row >= W.rows) throw Error("CUDA matvec: pack_row's row is outside the weight");
  const Layout l = layout_of(W.type, W.cols);
  if (l.q_row_bytes != W.q_row_bytes || l.m_row_bytes != W.m_row_bytes)
    throw Error("CUDA matvec: pack_row's weight has another layout");
  std::vector<uint8_t> staging(l.q_row_bytes + l.m_row_bytes);  // [quant row | meta row] (one-row planes)
  pack_rows(W.type, W.cols, 1, static_cast<const uint8_t*>(host_row), l, staging.data());
  auto ok = [](cudaError_t e) {
    if (e != cudaSuccess) throw Error(std::string("CUDA matvec: pack_row: ") + cudaGetErrorString(e));
  };
  const auto r = static_cast<size_t>(row);
  ok(cudaMemcpyAsync(W.data + W.q_row_bytes * r, staging.data(), W.q_row_bytes, cudaMemcpyHostToDevice, stream));
  if (W.m_row_bytes)
    ok(cudaMemcpyAsync(W.data + W.m_offset + W.m_row_bytes * r, staging.data() + W.q_row_bytes, W.m_row_bytes,
                       cudaMemcpyHostToDevice, stream));
  ok(cudaStreamSynchronize(stream));
}

}  // namespace df::cudamv
