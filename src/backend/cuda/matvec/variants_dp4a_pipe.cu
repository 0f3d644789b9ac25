// The workbench's pipelined variants of the int8-x kernels (mv_kernel with D > 0,
// kernels_fast.cuh) at n = 1: code = 5000 + 1000 ST + 100 D + 10 RW + U (ST: x staged by
// cp.async; D = 0: the unpipelined loop); at n = 4 and 8 (a verify's rows) the few of RowCfgs.
// A translation unit of its own so that it compiles beside the other variants.
#include "backend/cuda/matvec/dev_dp4a.cuh"
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"
#include "backend/cuda/matvec/variants.cuh"
#include "backend/cuda/matvec/variants_rwu.cuh"

#include <type_traits>

namespace df::cudamv {

namespace {

template <class F>
using PA = PlanarAdapter<F>;

// (D, RW, U, ST) of the variants; Q6_K (3 words per part) only those of <= 4 parts in registers.
template <int D, int RW, int U, int ST>
struct Cfg {
  static constexpr int kCode = 5000 + 1000 * ST + 100 * D + 10 * RW + U;
};
template <class... Cs>
struct CfgList {};
using Cfgs = CfgList<Cfg<2, 2, 1, 0>, Cfg<2, 2, 2, 0>, Cfg<3, 2, 1, 0>, Cfg<3, 2, 2, 0>, Cfg<0, 2, 1, 1>,
                     Cfg<0, 2, 4, 1>, Cfg<2, 2, 1, 1>, Cfg<2, 2, 2, 1>, Cfg<3, 2, 2, 1>, Cfg<2, 1, 2, 1>>;

// n = 4, 8: unstaged only, one or two rows per warp (launch.cuh's Dp4aPipe picks among such).
using RowCfgs = CfgList<Cfg<3, 2, 2, 0>, Cfg<2, 2, 2, 0>, Cfg<2, 2, 1, 0>, Cfg<0, 2, 2, 0>>;
template <int... Ns>
struct NList {};
using RowNs = NList<4, 8>;

template <class F, int D, int RW, int U, int ST>
constexpr bool wanted(Cfg<D, RW, U, ST>) {
  return F::kLoads == 1 || (D > 0 ? D : 1) * RW * U <= 4;
}

template <class F, int N, class... Cs>
bool launch_code(CfgList<Cs...>, const PlanarView& v, const float* x, float* y, int code, const MvFuse& f,
                 cudaStream_t s) {
  bool done = false;
  auto one = [&]<int D, int RW, int U, int ST>(Cfg<D, RW, U, ST> c) {
    if constexpr (wanted<F>(Cfg<D, RW, U, ST>{})) {
      if (!done && code == c.kCode) {
        MvFuse g = f;
        g.stage_x = ST == 1;
        launch_mv<PA<F>, N, RW, U, D>(v, x, y, s, true, g), done = true;
      }
    }
  };
  (one(Cs{}), ...);
  return done;
}

template <class F, int N, class... Cs>
bool attrs_code(CfgList<Cs...>, int code, cudaFuncAttributes& at) {
  bool done = false;
  auto one = [&]<int D, int RW, int U, int ST>(Cfg<D, RW, U, ST> c) {
    if constexpr (wanted<F>(Cfg<D, RW, U, ST>{})) {
      if (!done && code == c.kCode)
        done = cudaFuncGetAttributes(&at, mv_kernel<PA<F>, N, RW, U, true, D>) == cudaSuccess;
    }
  };
  (one(Cs{}), ...);
  return done;
}

template <class F, int N, class... Cs>
void prepare_codes(CfgList<Cs...>) {
  auto one = [&]<int D, int RW, int U, int ST>(Cfg<D, RW, U, ST>) {
    if constexpr (wanted<F>(Cfg<D, RW, U, ST>{})) prepare_mv<PA<F>, N, RW, U, D>();
  };
  (one(Cs{}), ...);
}

// The variant of code at n (n = 1: Cfgs; n in RowNs: RowCfgs); Op(cfgs, N-constant) does it.
template <class Op, int... Ns>
bool at_n(NList<Ns...>, int n, Op&& op) {
  if (n == 1) return op(Cfgs{}, std::integral_constant<int, 1>{});
  bool done = false;
  ((!done && n == Ns ? (done = op(RowCfgs{}, std::integral_constant<int, Ns>{}), true) : false) || ...);
  return done;
}

template <class F, int... Ns>
void prepare_ns(NList<Ns...>) {
  prepare_codes<F, 1>(Cfgs{});
  (prepare_codes<F, Ns>(RowCfgs{}), ...);
}

}  // namespace

void prepare_dp4a_pipe_variants() {
  variants::for_each(Dp4aFormats{}, []<class F>(F*) { prepare_ns<F>(RowNs{}); });
}

bool matvec_dp4a_pipe_regs(GgmlType t, int code, int& regs, int& local_bytes, int n) {
  cudaFuncAttributes at{};
  const bool found = variants::for_type(Dp4aFormats{}, t, [&]<class F>(F*) {
    return at_n(RowNs{}, n, [&]<class C, int N>(C c, std::integral_constant<int, N>) { return attrs_code<F, N>(c, code, at); });
  });
  if (!found) return false;
  regs = at.numRegs, local_bytes = static_cast<int>(at.localSizeBytes);
  return true;
}

bool matvec_dp4a_pipe_variant(const PackedWeight& W, const float* x, float* y, int code, cudaStream_t s, int n) {
  if (!int8_x_supported(W.type, W.cols)) return false;
  const PlanarView v = planar_view(W);
  MvFuse f;
  f.pdl = W.pdl;
  f.l2_bytes = W.l2_prefetch;
  f.blocks_per_sm = W.blocks_per_sm;
  const bool found = variants::for_type(Dp4aFormats{}, W.type, [&]<class F>(F*) {
    return at_n(RowNs{}, n, [&]<class C, int N>(C c, std::integral_constant<int, N>) {
      return launch_code<F, N>(c, v, x, y, code, f, s);
    });
  });
  if (!found) return false;
  check_launch("matvec pipelined variant");
  return true;
}

}  // namespace df::cudamv
