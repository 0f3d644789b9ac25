#pragma once
#include <memory>

#include "models/model.h"

namespace df {
std::unique_ptr<Model> make_qwen35(const gguf::File& f, Backend& b);
std::unique_ptr<Model> make_qwen35moe(const gguf::File& f, Backend& b);  // the same trunk with MoE FFNs
}
