// One row of a packed weight (matvec.cuh's PackedWeight) replaced from the file's bytes: an
// MTP head's drafting slots (Backend::weight_set_row), rows set one at a time after load.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/matvec/matvec.cuh"

namespace df::cudamv {

// Packs host_row (row_bytes(W.type, W.cols) bytes as the GGUF has them) into row `row` of W's
// quant and meta planes: queued on `stream`, which it waits for (the staging is pageable).
void pack_row(const PackedWeight& W, int64_t row, const void* host_row, cudaStream_t stream);

}  // namespace df::cudamv
