// Real GGUF files from llama.cpp's models/ folder (vocab-only files written by gguf-py).
// Skipped unless DF_LLAMA_SRC points to a llama.cpp tree that has them. Expected values were
// read with gguf-py's GGUFReader.
#include <gtest/gtest.h>

#include "reference_required.h"

#include <filesystem>

#include "common/error.h"
#include "gguf/gguf.h"

namespace df::gguf {
namespace {

std::filesystem::path llama_models_dir() {
  const std::string src = DF_LLAMA_SRC;
  return src.empty() ? std::filesystem::path() : std::filesystem::path(src) / "models";
}

TEST(GgufLlamaFiles, Qwen2Vocab) {
  const auto path = llama_models_dir() / "ggml-vocab-qwen2.gguf";
  if (llama_models_dir().empty() || !std::filesystem::exists(path))
    DF_REFERENCE_MISSING("no llama.cpp models dir (DF_LLAMA_SRC)");
  auto f = File::open(path.string());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->metadata().size(), 20u);
  EXPECT_TRUE(f->tensors().empty());
  // This file ends right after its metadata (no padding): nothing may be read past it.
  EXPECT_EQ(f->file_size(), 5928681u);
  EXPECT_EQ(f->data_offset(), f->file_size());
  EXPECT_EQ(f->metadata().front().first, "general.architecture");
  EXPECT_EQ(f->get_string("general.architecture"), "qwen2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f->get_u64("qwen2.block_count"), 32u);
  EXPECT_EQ(f->get_u64("qwen2.context_length"), 32768u);
  EXPECT_EQ(f->get_u64("tokenizer.ggml.eos_token_id"), 151643u);
  EXPECT_DOUBLE_EQ(f->get_f64("qwen2.rope.freq_base"), 1000000.0);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_f64("qwen2.attention.layer_norm_rms_epsilon")), 1e-6f);
  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 151936u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[2], "#");
  EXPECT_EQ(tokens.back(), "[PAD151935]");
  const auto merges = f->get_string_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 151387u);
  EXPECT_EQ(merges[0], "\xc4\xa0 \xc4\xa0");  // "Ġ Ġ"
  const Value* types = f->find("tokenizer.ggml.token_type");
  ASSERT_NE(types, nullptr);
  EXPECT_EQ(types->array_type, ValueType::INT32);
  EXPECT_EQ(types->array_size(), 151936u);
  EXPECT_NE(f->get_string("tokenizer.chat_template").find("<|im_start|>"), std::string::npos);
}

TEST(GgufLlamaFiles, EveryVocabFileParses) {
  const auto dir = llama_models_dir();
  if (dir.empty() || !std::filesystem::is_directory(dir))
    DF_REFERENCE_MISSING("no llama.cpp models dir (DF_LLAMA_SRC)");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".gguf") continue;
    SCOPED_TRACE(e.path().string());
    std::unique_ptr<File> f;
    ASSERT_NO_THROW(f = File::open(e.path().string()));
    EXPECT_TRUE(f->has("general.architecture"));
    EXPECT_TRUE(f->has("tokenizer.ggml.tokens"));
    ++n;
  }
  EXPECT_GT(n, 0);
}

}  // namespace
}  // namespace df::gguf
