// The CUDA backend's argument checks: a failed condition becomes a df::Error naming it
// ("cuda backend: " + what). (CUDA runtime errors: cuda_check.h.)
#pragma once
#include <string>

#include "common/error.h"

namespace df::cuda {

inline void check(bool ok, const char* what) {
  if (!ok) throw Error(std::string("cuda backend: ") + what);
}

// Two matrices of the same rows x cols (types and strides aside).
template <class T>
bool same_shape(const T& a, const T& b) {
  return a.cols == b.cols && a.rows == b.rows;
}

}  // namespace df::cuda
