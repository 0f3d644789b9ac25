#include "backend/cuda/cuda_check.h"
#include "backend/cuda/ops/decode.cuh"
#include "backend/cuda/ops/get_rows.cuh"

namespace df::cuda {
namespace {

// One block per id; a thread per 32-element chunk.
template <class Dec>
__global__ void get_rows_kernel(const uint8_t* table, size_t ts, int64_t table_rows, int64_t cols, const int32_t* ids,
                                float* out, int64_t os) {
  const int32_t id = ids[blockIdx.x];
  float* o = out + static_cast<int64_t>(blockIdx.x) * os;
  const bool ok = id >= 0 && id < table_rows;
  for (int64_t c = threadIdx.x; c < cols / 32; c += blockDim.x) {
    float v[32];
    if (ok) {
      Dec::chunk(table + static_cast<size_t>(id) * ts, c, v);
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) v[i] = __int_as_float(0x7fc00000);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) o[c * 32 + i] = v[i];
  }
}

}  // namespace

bool get_rows_supported(GgmlType type) {
  return with_decoder(type, [](auto) {});
}

void launch_get_rows(GgmlType type, const void* table, size_t table_stride, int64_t table_rows, int64_t cols,
                     const int32_t* ids, int64_t n, float* out, int64_t out_stride, cudaStream_t s) {
  if (n == 0) return;
  if (cols % 32 != 0) throw Error("cuda get_rows: row length must be a multiple of 32");
  const bool ok = with_decoder(type, [&](auto dec) {
    using Dec = decltype(dec);
    get_rows_kernel<Dec><<<static_cast<unsigned>(n), 128, 0, s>>>(static_cast<const uint8_t*>(table), table_stride,
                                                                   table_rows, cols, ids, out, out_stride);
  });
  if (!ok) throw Error("cuda get_rows: no device decoder for " + std::string(type_name(type)));
  launch_check("get_rows");
}

}  // namespace df::cuda
