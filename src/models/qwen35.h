#pragma once
#include <memory>

#include "models/model.h"

namespace df {
// head_file (optional): the MTP head is taken from that file instead (qwen35::mtp_from_file).
std::unique_ptr<Model> make_qwen35(const gguf::File& f, Backend& b, const gguf::File* head_file = nullptr);
std::unique_ptr<Model> make_qwen35moe(const gguf::File& f, Backend& b,
                                      const gguf::File* head_file = nullptr);  // qwen35moe.cpp
}
