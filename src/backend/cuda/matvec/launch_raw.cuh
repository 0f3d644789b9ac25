// Internal: type and n dispatch of the raw-layout kernels for a list of format structs.
#pragma once
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/kernels_raw.cuh"

namespace df::cudamv {

template <class F, int N>
void launch_mv_raw_n(const RawView& v, const float* x, float* y, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((v.rows + kRawWarps - 1) / kRawWarps);
  mv_raw<F, N><<<blocks, kRawWarps * 32, 0, s>>>(v.w, v.row_bytes, v.rows, v.cols, v.tables, x, y);
}

template <class F>
void launch_mv_raw(const RawView& v, const float* x, float* y, int n, cudaStream_t s) {
  switch (n) {
    case 1: launch_mv_raw_n<F, 1>(v, x, y, s); break;
    case 2: launch_mv_raw_n<F, 2>(v, x, y, s); break;
    case 3: launch_mv_raw_n<F, 3>(v, x, y, s); break;
    case 4: launch_mv_raw_n<F, 4>(v, x, y, s); break;
    case 5: launch_mv_raw_n<F, 5>(v, x, y, s); break;
    case 6: launch_mv_raw_n<F, 6>(v, x, y, s); break;
    case 7: launch_mv_raw_n<F, 7>(v, x, y, s); break;
    default: launch_mv_raw_n<F, 8>(v, x, y, s); break;
  }
  check_launch("matvec");
}

template <class F>
void launch_get_rows_raw(const RawView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  const int64_t nparts = v.cols / F::kPartElems;
  const unsigned bx = static_cast<unsigned>(nparts < 128 * 64 ? (nparts + 127) / 128 : 64);
  for (int done = 0; done < n; done += 65535) {
    const int m = n - done < 65535 ? n - done : 65535;
    get_rows_raw<F><<<dim3(bx, static_cast<unsigned>(m)), 128, 0, s>>>(v.w, v.row_bytes, v.rows, v.cols, v.tables,
                                                                      ids + done, out + int64_t{done} * v.cols);
  }
  check_launch("get_rows");
}

template <class... Fs>
struct FormatList {};

template <class... Fs>
bool matvec_raw_list(FormatList<Fs...>, GgmlType t, const RawView& v, const float* x, float* y, int n, cudaStream_t s) {
  return ((Fs::kType == t ? (launch_mv_raw<Fs>(v, x, y, n, s), true) : false) || ...);
}

template <class... Fs>
bool get_rows_raw_list(FormatList<Fs...>, GgmlType t, const RawView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  return ((Fs::kType == t ? (launch_get_rows_raw<Fs>(v, ids, n, out, s), true) : false) || ...);
}

}  // namespace df::cudamv
