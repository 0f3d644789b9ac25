// Vocabularies the fuzz targets tokenize with: the default model's (always there: it is part
// of the repository) and llama.cpp's vocab files named in `llama_vocabs` (ggml-vocab-NAME.gguf
// under DF_LLAMA_SRC/models) that exist. Loaded in LLVMFuzzerInitialize: under ASan a
// vocabulary of 152k tokens takes seconds, which inside the first input would count against
// -timeout.
#pragma once
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace df::fuzz {

struct Vocab {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tok;
};

inline std::vector<Vocab> load_vocabs(std::initializer_list<const char*> llama_vocabs) {
  std::vector<std::string> paths = {std::string(DF_SOURCE_DIR) + "/models/default.gguf"};
  const std::string src = DF_LLAMA_SRC;
  if (!src.empty())
    for (const char* name : llama_vocabs) paths.push_back(src + "/models/ggml-vocab-" + name + ".gguf");
  std::vector<Vocab> out;
  for (const auto& p : paths) {
    if (!std::filesystem::exists(p)) continue;
    Vocab v;
    v.file = gguf::File::open(p);
    v.tok = Tokenizer::from_gguf(*v.file);
    out.push_back(std::move(v));
  }
  if (out.empty()) __builtin_trap();  // no default model: the checkout is broken
  return out;
}

}  // namespace df::fuzz
