#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "models/qwen3.h"
#include "models/qwen35.h"

namespace df {

std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend) {
  const std::string arch = file.get_string("general.architecture");
  uint64_t weight_bytes = 0;  // every tensor, each padded to 256 bytes
  for (const auto& t : file.tensors()) weight_bytes += (t.nbytes + 255) / 256 * 256;
  backend.reserve_weights(weight_bytes);
  if (arch == "qwen3") return make_qwen3(file, backend);
  if (arch == "qwen35") return make_qwen35(file, backend);
  throw Error("unsupported model architecture '" + arch + "' (supported: qwen3, qwen35)");
}

}  // namespace df
