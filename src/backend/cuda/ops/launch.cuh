// Kernel launches of the ops, optionally with programmatic dependent launch (PDL).
//
// With `pdl`, a kernel is launched with cudaLaunchAttributeProgrammaticStreamSerialization:
// it may start while the previous kernel of the stream (or of a captured graph: stream
// capture turns the attribute into a programmatic edge) still runs, once every block of that
// kernel has called pdl_trigger() or exited. Every kernel launched this way calls pdl_wait()
// in every block before its first global read of another kernel's output and before its
// first global write (only kernel arguments, weights and index math may come before), and
// pdl_trigger() right after it (its successors' prologues then overlap its body). Both are
// no-ops in a kernel launched without the attribute. Because every block waits before it
// exits, a kernel's completion implies its predecessor's: the chain stays transitive.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.h"

namespace df::cuda {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// kernel<<<grid, block, smem, s>>>(args...), with the PDL attribute when `pdl`.
template <class... P, class... A>
void launch_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl, A&&... args) {
  if (!pdl) {
    kernel<<<grid, block, smem, s>>>(std::forward<A>(args)...);
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cuda_check(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...), "cudaLaunchKernelEx");
}

}  // namespace df::cuda
