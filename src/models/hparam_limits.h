// Plausibility limits for a model file's size hyperparameters, checked before any loader
// multiplies them: every integer key of the architecture's namespace (`qwen3.*`, `qwen35.*`:
// layer counts, widths, head counts and sizes, state sizes; arrays element by element) must be
// at most kMaxHparam, so that products of up to three of them stay far inside int64. The one
// exception is a context length (`*context_length`), which only bounds positions and is never
// multiplied.
#pragma once
#include <cstdint>
#include <string>

namespace df::gguf {
class File;
}

namespace df {

inline constexpr int64_t kMaxHparam = int64_t{1} << 20;

// Throws df::Error naming the key and its value when one is out of range.
void check_hparam_limits(const gguf::File& f, const std::string& arch);

}  // namespace df
