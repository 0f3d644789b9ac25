// The instances of one (type F, depth D) for mma2_q4_0.cu / mma2_q8_0.cu (see mma2_dispatch.h).
#pragma once
#include <utility>

#include "mvmma/mma2_dispatch.h"

namespace df::mvmma2::detail {

template <class F, int D>
struct Dispatch {
  template <template <class> class S, int... Ns>
  static void prepare_ns(std::integer_sequence<int, Ns...>) {
    ((mvmma2::prepare<F, S, Ns + 1, D, false>(), mvmma2::prepare<F, S, Ns + 1, D, true>()), ...);
  }
  static void prepare() {
    prepare_ns<SrcTile>(std::make_integer_sequence<int, 8>{});
    prepare_ns<SrcShfl>(std::make_integer_sequence<int, 8>{});
    prepare_ns<SrcLd32>(std::make_integer_sequence<int, 8>{});
  }
  template <template <class> class S, int... Ns>
  static void attrs_ns(std::integer_sequence<int, Ns...>, std::vector<Attr>& out) {
    auto one = [&](auto kernel, int n, bool kwk) {
      cudaFuncAttributes at{};
      if (cudaFuncGetAttributes(&at, kernel) == cudaSuccess)
        out.push_back({static_cast<Src>(S<F>::kId), n, kwk, at.numRegs, static_cast<int>(at.localSizeBytes)});
    };
    ((one(mma2_matvec<F, S, Ns + 1, D, false>, Ns + 1, false), one(mma2_matvec<F, S, Ns + 1, D, true>, Ns + 1, true)), ...);
  }
  static std::vector<Attr> attrs() {
    std::vector<Attr> a;
    attrs_ns<SrcTile>(std::make_integer_sequence<int, 8>{}, a);
    attrs_ns<SrcShfl>(std::make_integer_sequence<int, 8>{}, a);
    attrs_ns<SrcLd32>(std::make_integer_sequence<int, 8>{}, a);
    return a;
  }
  template <template <class> class S, int... Ns>
  static cudaError_t launch_ns(std::integer_sequence<int, Ns...>, const WView& v, const float* x, float* y, float* part,
                               unsigned* cnt, int n, int ks, int wk, bool pdl, cudaStream_t st) {
    cudaError_t r = cudaErrorInvalidValue;
    ((n == Ns + 1 ? (r = mvmma2::launch<F, S, Ns + 1, D>(v, x, y, part, cnt, ks, wk, pdl, st), true) : false) || ...);
    return r;
  }
  static cudaError_t launch(Src src, const WView& v, const float* x, float* y, float* part, unsigned* cnt, int n, int ks,
                            int wk, bool pdl, cudaStream_t st) {
    const auto ns = std::make_integer_sequence<int, 8>{};
    if (src == Src::Tile) return launch_ns<SrcTile>(ns, v, x, y, part, cnt, n, ks, wk, pdl, st);
    if (src == Src::Shfl) return launch_ns<SrcShfl>(ns, v, x, y, part, cnt, n, ks, wk, pdl, st);
    return launch_ns<SrcLd32>(ns, v, x, y, part, cnt, n, ks, wk, pdl, st);
  }
};

}  // namespace df::mvmma2::detail
