// The scalar part of the registry (registry.h): every format's reference code
// (src/quant/formats_*.cpp). Every SIMD kernel is tested against these.
#include "quant/cpu/registry.h"

namespace df::cpu {
namespace {

// The reference dot product as a 1 x 1 microkernel (gemm_tiled.h).
template <class F>
struct MkRef {
  static constexpr int kRows = 1, kCols = 1, kRowsDecode = 1;
  static constexpr bool kShapeFree = true;  // 1 x 1 tiles only
  template <int R, int C>
  static void tile(int64_t n, const uint8_t* const* w, const uint8_t* const* a, float* out) {
    out[0] = F::dot_ref(reinterpret_cast<const typename F::Block*>(w[0]),
                        reinterpret_cast<const typename F::Act::Block*>(a[0]), n / F::block_elems);
  }
};

template <class F>
struct Simd {
  using Mk = MkRef<F>;
  static void quantize(const float* x, void* out, int64_t n)
    requires quant::ActFormat<F>
  {
    F::quantize_act(x, static_cast<typename F::Block*>(out), n / F::block_elems);
  }
};

}  // namespace

constinit const Registry kScalarPart = make_registry<Simd>();

}  // namespace df::cpu
