// The backend the engine builds from its options (EngineOptions -> BackendOptions): Engine::load
// uses it, and the CUDA tests build the engine's own configuration from it.
#pragma once

#include "backend/backend_factory.h"
#include "diskformer/engine.h"

namespace df {

BackendOptions backend_options(const EngineOptions& opt);

}  // namespace df
