// Internal: the int8-x kernels over raw ggml blocks (dev_i8_basic.cuh, dev_i8_iq.cuh) in
// mv_kernel (kernels_fast.cuh), and their type and n dispatch for a list of formats. Included
// by family_i8_basic.cu and family_i8_iq.cu (one list each, compiled apart).
#pragma once
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"

namespace df::cudamv {

// A raw-block format with an int8-x dot: load issues the part's loads (R::Part, registers),
// dot unpacks and multiplies them; parts in flight per lane at n <= 2 (kDefaultU): 4 for
// parts of a few registers, 2 up to 48 bytes, else 1 (Q2_K / Q3_K / TQ2_0: 32-byte planes).
template <class R>
struct RawI8Adapter {
  static constexpr GgmlType kType = R::kType;
  static constexpr int kPartElems = R::kPartElems, kLoads = 1;
  static constexpr bool kSums = false, kGlobalX = false, kInt8X = true, kQ8K = R::kQ8K;
  static constexpr int kDefaultU = sizeof(typename R::Part) <= 16 ? 4 : sizeof(typename R::Part) <= 48 ? 2 : 1;
  // the short pipe (launch.cuh short_depth) 4 deep only for parts of a few registers (no spills)
  static constexpr int kShortMax = sizeof(typename R::Part) <= 24 ? 4 : 2;
  struct Regs {
    typename R::Part p;
  };
  __device__ static void load(const PlanarView&, const uint8_t* qr, const uint8_t*, int t, int, Regs& r) {
    R::load(qr + static_cast<int64_t>(t / R::kParts) * R::kBlockBytes, t % R::kParts, r.p);
  }
  template <int N, class X>
  __device__ static void dot(const PlanarView& v, const Regs& r, const X& xa, float (&acc)[N]) {
    R::template dot<N>(r.p, v.tables, xa, acc);
  }
};

template <class... Rs>
struct I8List {};

template <class... Rs>
constexpr bool i8_has_type(I8List<Rs...>, GgmlType t) {
  return ((Rs::kType == t) || ...);
}

template <class... Rs>
Mv matvec_i8_list(I8List<Rs...>, GgmlType t, const PlanarView& v, const float* x, float* y, int n, cudaStream_t s,
                  const MvFuse& f) {
  Mv r = Mv::kNoType;
  ((Rs::kType == t ? (r = launch_mv_default<RawI8Adapter<Rs>>(v, x, y, n, s, f) ? Mv::kDone : Mv::kNoFuse, true)
                   : false) ||
   ...);
  if (r == Mv::kDone) check_launch("matvec");
  return r;
}

template <class... Rs>
void prepare_i8_list(I8List<Rs...>) {
  (prepare_mv_default<RawI8Adapter<Rs>>(), ...);
}

}  // namespace df::cudamv
