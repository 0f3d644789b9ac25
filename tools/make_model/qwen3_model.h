// Random-weight qwen3 (dense) models for df_make_model (--arch qwen3), also used by tests and
// fuzz targets to write small valid models in memory.
#pragma once
#include <cstdint>

#include "gguf/gguf.h"
#include "qwen35_model.h"
#include "quant/types.h"

namespace df::make_model {

// The qwen3.* hyperparameter keys of shape s.
void write_qwen3_keys(gguf::Writer& w, const BaseShape& s);
// Every tensor (s.vocab rows of token_embd / output). Returns the number of parameters.
// A whole model: keys, the tokenizer keys (written by the caller), then the tensors.
int64_t write_qwen3_tensors(gguf::Writer& w, const BaseShape& s, GgmlType type, const Qwen35Scales& sc);

}  // namespace df::make_model
