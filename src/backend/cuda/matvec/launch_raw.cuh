// Internal: type and n dispatch of the raw-layout formats (matvec through RawAdapter, and
// get_rows) for a list of format structs.
#pragma once
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/kernels_raw.cuh"
#include "backend/cuda/matvec/launch.cuh"

namespace df::cudamv {

template <class F>
void launch_get_rows_raw(const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  const int64_t nparts = v.cols / F::kPartElems;
  const unsigned bx = static_cast<unsigned>(nparts < 128 * 64 ? (nparts + 127) / 128 : 64);
  for (int done = 0; done < n; done += 65535) {
    const int m = n - done < 65535 ? n - done : 65535;
    get_rows_raw<F><<<dim3(bx, static_cast<unsigned>(m)), 128, 0, s>>>(v.q, v.q_row_bytes, v.rows, v.cols, v.tables,
                                                                      ids + done, out + int64_t{done} * v.cols);
  }
  check_launch("get_rows");
}

template <class... Fs>
struct FormatList {};

template <class... Fs>
Mv matvec_raw_list(FormatList<Fs...>, GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s,
                   const MvFuse& f) {
  Mv r = Mv::kNoType;
  ((Fs::kType == t ? (r = launch_mv_default<RawAdapter<Fs>>(v, x, y, n, s, f) ? Mv::kDone : Mv::kNoFuse, true)
                   : false) ||
   ...);
  if (r == Mv::kDone) check_launch("matvec");
  return r;
}

template <class... Fs>
bool get_rows_raw_list(FormatList<Fs...>, GgmlType t, const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  return ((Fs::kType == t ? (launch_get_rows_raw<Fs>(v, ids, n, out, s), true) : false) || ...);
}

template <class... Fs>
void prepare_raw_list(FormatList<Fs...>) {
  (prepare_mv_default<RawAdapter<Fs>>(), ...);
}

}  // namespace df::cudamv
