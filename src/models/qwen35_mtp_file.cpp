// An MTP head taken from another GGUF file (EngineOptions::mtp_head_path, `--mtp-head FILE`):
// a trunk without nextn layers (or with a head to replace) runs speculative decoding with the
// head of a file such as one written by `diskformer pull SPEC --tensors 'blk.64.*'`.
// The head file must hold the MTP block at the trunk's own index (blk.<n_layer>: a head is
// trained on its trunk's hidden states, so a head of a trunk of another depth is refused), be
// of the trunk's architecture and vocabulary, and agree on the hyperparameters that tensor
// shapes cannot show (norm epsilon, rope). Every tensor is loaded with the trunk's shapes,
// so a head that does not fit fails naming the tensor.
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/gguf.h"
#include "models/qwen35_mtp.h"

namespace df::qwen35 {
namespace {

// The block indices N of the file's blk.N.nextn.eh_proj.weight tensors.
std::vector<int64_t> mtp_blocks(const gguf::File& f) {
  std::vector<int64_t> out;
  for (const gguf::TensorInfo& t : f.tensors()) {
    long long n = -1;
    int end = 0;
    if (std::sscanf(t.name.c_str(), "blk.%lld.nextn.eh_proj.weight%n", &n, &end) == 1 &&
        end == static_cast<int>(t.name.size()) && n >= 0)
      out.push_back(n);
  }
  return out;
}

// Keys the head and the trunk must agree on where both files have them (the shapes of the
// head's tensors check the rest).
const char* const kSameKeys[] = {
    "embedding_length",           "feed_forward_length",        "attention.head_count",
    "attention.head_count_kv",    "attention.key_length",       "attention.value_length",
    "attention.layer_norm_rms_epsilon", "rope.freq_base",       "rope.dimension_count",
    "rope.dimension_sections",    "expert_count",               "expert_used_count",
    "expert_feed_forward_length", "expert_shared_feed_forward_length",
};

}  // namespace

std::unique_ptr<Mtp> mtp_from_file(const gguf::File& trunk, const gguf::File& head, Backend& b, const Hparams& hp,
                                   const Tensor& tok_embd, const blocks::OutputHead& out) {
  const ModelInfo& m = hp.info;
  const std::string what = "the MTP head file '" + head.path() + "'";
  const std::string head_arch = head.get_string("general.architecture", m.arch);
  if (head_arch != m.arch)
    throw Error(what + " is of architecture '" + head_arch + "', the model of '" + m.arch + "'");
  const std::vector<int64_t> blocks = mtp_blocks(head);
  if (blocks.empty()) throw Error(what + " holds no MTP head (no tensor blk.N.nextn.eh_proj.weight)");
  bool found = false;
  for (int64_t n : blocks) found = found || n == m.n_layer;
  if (!found)
    throw Error(what + " holds the MTP block blk." + std::to_string(blocks[0]) + " (the head of a trunk of " +
                std::to_string(blocks[0]) + " layers); the model has " + std::to_string(m.n_layer) +
                " trunk layers, so its head must be blk." + std::to_string(m.n_layer));
  std::unique_ptr<Mtp> mtp;
  try {
    mtp = std::make_unique<Mtp>(head, b, hp, tok_embd, out);  // shapes: the trunk's hyperparameters
  } catch (const Error& e) {
    throw Error(what + " does not fit the model: " + e.what());
  }
  for (const char* key : kSameKeys) {
    const std::string k = m.arch + "." + key;
    const gguf::Value* h = head.find(k);
    const gguf::Value* t = trunk.find(k);
    if (h && t && !(*h == *t)) throw Error(what + " does not fit the model: its '" + k + "' differs from the model's");
  }
  const gguf::Value* hv = head.find("tokenizer.ggml.tokens");
  const gguf::Value* tv = trunk.find("tokenizer.ggml.tokens");
  if (hv && tv && !(*hv == *tv)) throw Error(what + " does not fit the model: its vocabulary (tokenizer.ggml.tokens) differs");
  return mtp;
}

}  // namespace df::qwen35
