// The README's description of the shipped default model (section "The default model"):
// "models/default.gguf (23 MB, Q8_0) ... a qwen35 hybrid (8 trunk layers, layers 3 and 7 full
// attention, width 384, vocabulary 8192) with one MTP ("nextn") layer, 21.5 M parameters".
// Each figure is read back from the file here. (Its perplexity figures are checked against
// llama.cpp by DefaultModelRef.ReadmeHeldOutPerplexityFigures.)
// The training-time figures ("trained for 7 minutes on one H200", the held-out split's
// perplexity and MTP top-1) cannot be recomputed (the split is not shipped): the README's
// numbers must be those of tools/train/results/metrics.json, and that record must be of this
// file (its byte size, parameter count, shape, and heldout.txt's size and token count).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

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

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string format(const char* fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

TEST(DefaultModelFacts, TrainingFiguresAreTheRecordOfThisFile) {
  const auto m = nlohmann::json::parse(slurp(std::string(DF_SOURCE_DIR) + "/tools/train/results/metrics.json"));
  // The record is of the shipped file.
  EXPECT_EQ(m["gguf_bytes"].get<uint64_t>(), std::filesystem::file_size(kModel));
  auto f = gguf::File::open(kModel);
  cpu::CpuOptions o;
  o.threads = 1;
  cpu::CpuBackend backend(o);
  const auto model = load_model(*f, backend);
  const ModelInfo& info = model->info();
  EXPECT_EQ(m["params_total"].get<int64_t>(), info.n_params);
  EXPECT_EQ(m["config"]["vocab"].get<int64_t>(), info.n_vocab);
  EXPECT_EQ(m["config"]["n_embd"].get<int64_t>(), info.n_embd);
  EXPECT_EQ(m["config"]["n_layer"].get<int64_t>(), info.n_layer);
  EXPECT_EQ(m["config"]["n_mtp"].get<int64_t>(), info.n_layer_nextn);
  const std::string heldout = slurp(std::string(DF_SOURCE_DIR) + "/models/heldout.txt");
  EXPECT_EQ(m["data"]["heldout_txt_bytes"].get<size_t>(), heldout.size());
  const auto tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(m["data"]["heldout_txt_tokens"].get<size_t>(), tok->encode(heldout, false).size());

  // The README states the record's figures.
  const std::string md = slurp(std::string(DF_SOURCE_DIR) + "/README.md");
  const auto has = [&](const std::string& s) { EXPECT_NE(md.find(s), std::string::npos) << "README.md lacks: " << s; };
  const double minutes = m["train_seconds"].get<double>() / 60;
  has("trained for\n" + std::to_string(std::lround(minutes)) + " minutes on one H200");
  EXPECT_NE(m["gpu"].get<std::string>().find("H200"), std::string::npos);
  const auto& split = m["heldout_split"];
  has("| held-out split perplexity (training run, " + std::to_string(m["data"]["heldout_files"].get<int>()) +
      " files) | " + format("%.2f", split["ppl"].get<double>()) + " |");
  has("| MTP top-1 for the token after next (training run, same split) | " +
      format("%.1f", 100 * split["mtp_top1"].get<double>()) + " % |");
}

}  // namespace
}  // namespace df
