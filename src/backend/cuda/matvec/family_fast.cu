// Launchers of the planar-layout formats (dev_fast.cuh, and the float formats): matvec with
// the default configuration per n, and get_rows (exact). The workbench's variants are in
// variants_fast.cu.
#include "backend/cuda/matvec/dev_fast.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/matvec.cuh"

namespace df::cudamv {

namespace {

template <class F>
using PA = PlanarAdapter<F>;

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
void prepare_list(FastList<Fs...>) {
  (prepare_mv_default<PA<Fs>>(), ...);
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

bool get_rows_fast(const PackedWeight& W, const int32_t* ids, int n, float* out, cudaStream_t s) {
  if (!get_rows_list(FastFormats{}, W, ids, n, out, s)) return false;
  check_launch("get_rows");
  return true;
}

}  // namespace df::cudamv
