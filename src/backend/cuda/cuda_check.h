// Error checks of CUDA runtime calls: a failing call becomes a df::Error naming what was done.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "common/error.h"

namespace df::cuda {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("cuda: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// After a kernel launch: a bad configuration shows up here (errors inside the kernel surface
// at the next synchronisation).
inline void launch_check(const char* kernel) { cuda_check(cudaGetLastError(), kernel); }

}  // namespace df::cuda
