#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "models/qwen3.h"
#include "models/qwen35.h"

namespace df {

std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend) {
  const std::string arch = file.get_string("general.architecture");
  if (arch == "qwen3") return make_qwen3(file, backend);
  if (arch == "qwen35") return make_qwen35(file, backend);
  throw Error("unsupported model architecture '" + arch + "' (supported: qwen3, qwen35)");
}

}  // namespace df

namespace df {

Batch Batch::sequence(const int32_t* tokens, int64_t n, int64_t pos0, bool all_outputs, bool last_output, int32_t s) {
  Batch b;
  b.token.assign(tokens, tokens + n);
  b.pos.resize(static_cast<size_t>(n));
  b.seq.assign(static_cast<size_t>(n), s);
  b.output.assign(static_cast<size_t>(n), all_outputs ? 1 : 0);
  for (int64_t i = 0; i < n; ++i) b.pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i);
  if (n > 0 && last_output) b.output.back() = 1;
  return b;
}

}  // namespace df
