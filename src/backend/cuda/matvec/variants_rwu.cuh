// The workbench's (RW, U) grid at n = 1, shared by the f32-x (variants_fast.cu) and int8-x
// (variants_dp4a.cu) variants: code = 10 RW + U (rows per warp, parts in flight per lane),
// codes 11 12 14 21 22 24 41 42 (variants.cuh), with the adapter's default x path.
#pragma once
#include "backend/cuda/matvec/dispatch.cuh"
#include "backend/cuda/matvec/launch.cuh"

namespace df::cudamv::variants {

template <class A>
bool launch_rwu(int code, const PlanarView& v, const float* x, float* y, cudaStream_t s) {
  switch (code) {
    case 11: launch_mv<A, 1, 1, 1>(v, x, y, s); return true;
    case 12: launch_mv<A, 1, 1, 2>(v, x, y, s); return true;
    case 14: launch_mv<A, 1, 1, 4>(v, x, y, s); return true;
    case 21: launch_mv<A, 1, 2, 1>(v, x, y, s); return true;
    case 22: launch_mv<A, 1, 2, 2>(v, x, y, s); return true;
    case 24: launch_mv<A, 1, 2, 4>(v, x, y, s); return true;
    case 41: launch_mv<A, 1, 4, 1>(v, x, y, s); return true;
    case 42: launch_mv<A, 1, 4, 2>(v, x, y, s); return true;
    default: return false;
  }
}

template <class A>
void prepare_rwu() {
  prepare_mv<A, 1, 1, 1>();
  prepare_mv<A, 1, 1, 2>();
  prepare_mv<A, 1, 1, 4>();
  prepare_mv<A, 1, 2, 1>();
  prepare_mv<A, 1, 2, 2>();
  prepare_mv<A, 1, 2, 4>();
  prepare_mv<A, 1, 4, 1>();
  prepare_mv<A, 1, 4, 2>();
}

// fn(static_cast<F*>(nullptr)) for the format F of the list whose kType is t; false when none.
template <template <class...> class L, class... Fs, class Fn>
bool for_type(L<Fs...>, GgmlType t, Fn&& fn) {
  return ((Fs::kType == t ? fn(static_cast<Fs*>(nullptr)) : false) || ...);
}

// fn(static_cast<F*>(nullptr)) for every format F of the list.
template <template <class...> class L, class... Fs, class Fn>
void for_each(L<Fs...>, Fn&& fn) {
  (fn(static_cast<Fs*>(nullptr)), ...);
}

}  // namespace df::cudamv::variants
