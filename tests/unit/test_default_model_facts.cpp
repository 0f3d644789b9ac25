// The README's description of the shipped default model (section "The default model"):
// "models/default.gguf (23 MB, Q8_0) ... a qwen35 hybrid (8 trunk layers, layers 3 and 7 full
// attention, width 384, vocabulary 8192) with one MTP ("nextn") layer, 21.5 M parameters".
// Each figure is read back from the file here. (Its perplexity figures are checked against
// llama.cpp by DefaultModelRef.ReadmeHeldOutPerplexityFigures.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "models/model.h"

namespace df {
namespace {

const std::string kModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";

TEST(DefaultModelFacts, WhatTheReadmeSays) {
  const auto bytes = std::filesystem::file_size(kModel);
  EXPECT_EQ(std::lround(static_cast<double>(bytes) / 1e6), 23) << bytes << " bytes";  // "23 MB"
  auto f = gguf::File::open(kModel);
  EXPECT_EQ(f->get_u64("general.file_type"), 7u);  // llama_ftype MOSTLY_Q8_0
  for (const auto& t : f->tensors()) {
    const bool matrix = t.ne.size() == 2 && t.name.find("ssm_conv1d") == std::string::npos;
    if (matrix) {
      EXPECT_EQ(t.type, GgmlType::Q8_0) << t.name;  // conv taps and norms stay f32
    }
  }
  cpu::CpuOptions o;
  o.threads = 1;
  cpu::CpuBackend backend(o);
  const auto model = load_model(*f, backend);
  const ModelInfo& m = model->info();
  EXPECT_EQ(m.arch, "qwen35");
  EXPECT_EQ(m.n_layer, 8);
  EXPECT_EQ(m.n_layer_nextn, 1);
  EXPECT_EQ(m.n_embd, 384);
  EXPECT_EQ(m.n_vocab, 8192);
  std::vector<int> full_attention;  // layers with attention weights instead of a DeltaNet
  for (int l = 0; l < m.n_layer; ++l)
    if (f->find_tensor("blk." + std::to_string(l) + ".attn_q.weight")) full_attention.push_back(l);
  EXPECT_EQ(full_attention, (std::vector<int>{3, 7}));
  EXPECT_EQ(m.n_layer_recurrent, 6);
  EXPECT_EQ(std::lround(static_cast<double>(m.n_params) / 1e5), 215) << m.n_params;  // "21.5 M"
}

}  // namespace
}  // namespace df
