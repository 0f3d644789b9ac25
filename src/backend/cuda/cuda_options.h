// The CUDA backend's options from the factory's (BackendOptions -> CudaOptions): the one
// mapping that make_backend uses, so that tests can build the backend the engine builds
// (with runtime/backend_options.h: EngineOptions -> BackendOptions).
#pragma once

namespace df {
struct BackendOptions;
}

namespace df::cuda {

struct CudaOptions;

// Throws df::Error for an unknown cuda_expert_source.
CudaOptions cuda_options(const BackendOptions& opt);

}  // namespace df::cuda
