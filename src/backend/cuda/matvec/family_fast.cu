// Launchers of the planar-layout formats (dev_fast.cuh, and the float formats): matvec with
// the default configuration per n, the workbench's variants, and get_rows (exact).
#include "backend/cuda/matvec/dev_fast.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cudamv {

namespace {

template <class... Fs>
struct FastList {};
using FastFormats = FastList<FastF32, FastF16, FastBF16, FastQ4_0, FastQ8_0, FastQ4_1, FastQ5_0, FastQ5_1, FastQ4_K, FastQ5_K, FastQ6_K, FastIQ4_XS>;

template <class F>
using PA = PlanarAdapter<F>;

PlanarView planar_view(const PackedWeight& W) {
  return PlanarView{W.data, W.data + W.m_offset, W.q_row_bytes, W.m_row_bytes, W.rows, W.cols,
                    static_cast<const DevTables*>(W.tables)};
}

// The workbench's variants at n = 1 (codes: dispatch.cuh).
template <class F>
bool launch_variant(const PlanarView& v, const float* x, float* y, int code, cudaStream_t s) {
  switch (code) {
    case 11: launch_mv<PA<F>, 1, 1, 1>(v, x, y, s); return true;
    case 12: launch_mv<PA<F>, 1, 1, 2>(v, x, y, s); return true;
    case 14: launch_mv<PA<F>, 1, 1, 4>(v, x, y, s); return true;
    case 21: launch_mv<PA<F>, 1, 2, 1>(v, x, y, s); return true;
    case 22: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s); return true;
    case 24: launch_mv<PA<F>, 1, 2, 4>(v, x, y, s); return true;
    case 41: launch_mv<PA<F>, 1, 4, 1>(v, x, y, s); return true;
    case 42: launch_mv<PA<F>, 1, 4, 2>(v, x, y, s); return true;
    case 122: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s, false); return true;
    case 1022: launch_mv<PA<F>, 1, 2, 2>(v, x, y, s, true); return true;
    case 2021: launch_mv<PA<typename F::Other>, 1, 2, 1>(v, x, y, s); return true;
    case 2022: launch_mv<PA<typename F::Other>, 1, 2, 2>(v, x, y, s); return true;
    default: return false;
  }
}

template <class F>
void prepare_variants() {
  prepare_mv<PA<F>, 1, 1, 1>();
  prepare_mv<PA<F>, 1, 1, 2>();
  prepare_mv<PA<F>, 1, 1, 4>();
  prepare_mv<PA<F>, 1, 2, 1>();
  prepare_mv<PA<F>, 1, 2, 2>();
  prepare_mv<PA<F>, 1, 2, 4>();
  prepare_mv<PA<F>, 1, 4, 1>();
  prepare_mv<PA<F>, 1, 4, 2>();
  prepare_mv<PA<typename F::Other>, 1, 2, 1>();
  prepare_mv<PA<typename F::Other>, 1, 2, 2>();
  prepare_mv_default<PA<F>>();
}

template <class F>
__global__ void get_rows_fast_kernel(PlanarView v, const int32_t* __restrict__ ids, float* __restrict__ out) {
  const int32_t id = ids[blockIdx.y];
  float* o = out + int64_t{blockIdx.y} * v.cols;
  const int nparts = static_cast<int>(v.cols / F::kPartElems);
  const int nblocks = nparts / F::kPartsPerBlock;
  for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < nparts; t += gridDim.x * blockDim.x) {
    float w[F::kPartElems];
    if (id >= 0 && id < v.rows) {
      const uint8_t* qr = v.q + id * v.q_row_bytes;
      uint4 q[F::kLoads];
#pragma unroll
      for (int i = 0; i < F::kLoads; ++i)
        q[i] = *reinterpret_cast<const uint4*>(qr + (static_cast<int64_t>(i) * nparts + t) * 16);
      F::dequant(q, F::load_meta(v.m + id * v.m_row_bytes, t, nblocks), w);
    } else {
#pragma unroll
      for (int i = 0; i < F::kPartElems; ++i) w[i] = __int_as_float(0x7fc00000);
    }
#pragma unroll
    for (int i = 0; i < F::kPartElems; i += 4)
      *reinterpret_cast<float4*>(o + static_cast<int64_t>(t) * F::kPartElems + i) = make_float4(w[i], w[i + 1], w[i + 2], w[i + 3]);
  }
}

template <class F>
void launch_get_rows(const PlanarView& v, const int32_t* ids, int n, float* out, cudaStream_t s) {
  const int64_t nparts = v.cols / F::kPartElems;
  const unsigned bx = static_cast<unsigned>(nparts < 128 * 64 ? (nparts + 127) / 128 : 64);
  for (int done = 0; done < n; done += 65535) {
    const int m = n - done < 65535 ? n - done : 65535;
    get_rows_fast_kernel<F><<<dim3(bx, static_cast<unsigned>(m)), 128, 0, s>>>(v, ids + done, out + int64_t{done} * v.cols);
  }
}

template <class... Fs>
Mv matvec_list(FastList<Fs...>, const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s,
               const MvFuse& f) {
  const PlanarView v = planar_view(W);
  Mv r = Mv::kNoType;
  ((Fs::kType == W.type ? (r = launch_mv_default<PA<Fs>>(v, x, y, n, s, f) ? Mv::kDone : Mv::kNoFuse, true) : false) ||
   ...);
  return r;
}

template <class... Fs>
bool variant_list(FastList<Fs...>, const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  const PlanarView v = planar_view(W);
  return ((Fs::kType == W.type ? launch_variant<Fs>(v, x, y, code, s) : false) || ...);
}

template <class... Fs>
void prepare_list(FastList<Fs...>) {
  (prepare_variants<Fs>(), ...);
}

template <class... Fs>
bool get_rows_list(FastList<Fs...>, const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s) {
  const PlanarView v = planar_view(W);
  return ((Fs::kType == W.type ? (launch_get_rows<Fs>(v, ids, n, out, s), true) : false) || ...);
}

}  // namespace

Mv matvec_fast(const PackedWeight& W, const float* x, float* y, int n, cudaStream_t s, const MvFuse& f) {
  if (W.int8_x) return matvec_dp4a(W, x, y, n, s, f);
  const Mv r = matvec_list(FastFormats{}, W, x, y, n, s, f);
  if (r == Mv::kDone) check_launch("matvec");
  return r;
}

void prepare_fast() { prepare_list(FastFormats{}); }

bool matvec_fast_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s) {
  if (!variant_list(FastFormats{}, W, x, y, code, s)) return false;
  check_launch("matvec variant");
  return true;
}

bool get_rows_fast(const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s) {
  if (!get_rows_list(FastFormats{}, W, ids, n, out, s)) return false;
  check_launch("get_rows");
  return true;
}

}  // namespace df::cudamv
