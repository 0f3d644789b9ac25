#include "common/error.h"
#include "gguf/gguf.h"
#include "models/hparam_limits.h"
#include "models/model.h"
#include "models/qwen3.h"
#include "models/qwen35.h"

namespace df {

std::unique_ptr<Model> load_model(const gguf::File& file, Backend& backend, const gguf::File* mtp_head) {
  const std::string arch = file.get_string("general.architecture");
  check_hparam_limits(file, arch);
  uint64_t weight_bytes = 0;  // every tensor, each padded to 256 bytes
  for (const gguf::File* f : {&file, mtp_head})
    if (f)
      for (const auto& t : f->tensors()) weight_bytes += (t.nbytes + 255) / 256 * 256;
  if (mtp_head && arch == "qwen3")
    throw Error("an MTP head file was given, but architecture 'qwen3' has no MTP head (qwen35 and qwen35moe do)");
  for (const gguf::File* f : {&file, mtp_head})
    if (f && !f->path().empty() && f->base()) backend.weight_file(f->path(), f->base(), f->file_size());
  backend.reserve_weights(weight_bytes);
  if (arch == "qwen3") return make_qwen3(file, backend);
  if (arch == "qwen35") return make_qwen35(file, backend, mtp_head);
  if (arch == "qwen35moe") return make_qwen35moe(file, backend, mtp_head);
  throw Error("unsupported model architecture '" + arch + "' (supported: qwen3, qwen35, qwen35moe)");
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
