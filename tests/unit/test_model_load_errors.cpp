// Model loading names what is wrong: every missing required key and tensor, every tensor whose
// shape does not follow the hyperparameters, and a tensor type the build cannot compute with
// is a df::Error whose message names the key or tensor. The models are the small valid ones
// of tools/make_model/tiny_models.h (df_make_model's writers), edited one thing at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "models/model.h"
#include "tiny_models.h"

namespace df {
namespace {

struct Edits {
  std::set<std::string> drop_keys, drop_tensors;
  std::vector<std::pair<std::string, gguf::Value>> set_keys;
  std::function<void(gguf::TensorInfo&, std::vector<uint8_t>&)> tensor_edit;  // applied to every tensor
};

class ModelLoad : public ::testing::Test {
 protected:
  cpu::CpuBackend backend_{[] {
    cpu::CpuOptions o;
    o.threads = 1;
    return o;
  }()};

  // The base model rebuilt with the edits, then loaded; returns the error message ("" = loaded
  // and ran a forward pass of two tokens).
  std::string load(const gguf::Writer& base_writer, const Edits& e) {
    const std::vector<uint8_t> base = base_writer.to_bytes();
    const auto f = gguf::File::from_memory(base.data(), base.size());
    gguf::Writer w;
    for (const auto& [k, v] : f->metadata())
      if (!e.drop_keys.count(k)) w.set(k, v);
    for (const auto& [k, v] : e.set_keys) w.set(k, v);
    for (gguf::TensorInfo t : f->tensors()) {
      if (e.drop_tensors.count(t.name)) continue;
      std::vector<uint8_t> d(f->tensor_data(t), f->tensor_data(t) + t.nbytes);
      if (e.tensor_edit) e.tensor_edit(t, d);
      w.add_tensor(t.name, t.type, t.ne, d.data(), d.size());
    }
    bytes_ = w.to_bytes();
    file_ = gguf::File::from_memory(bytes_.data(), bytes_.size());
    try {
      auto model = load_model(*file_, backend_);
      make_model::smoke_forward(*model, 1, 2);
    } catch (const Error& err) {
      return err.what();
    }
    return "";
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<gguf::File> file_;
};

std::vector<std::string> tensor_names(const gguf::Writer& w) {
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::from_memory(bytes.data(), bytes.size());
  std::vector<std::string> out;
  for (const auto& t : f->tensors()) out.push_back(t.name);
  return out;
}

std::vector<std::string> key_names(const gguf::Writer& w) {
  const auto bytes = w.to_bytes();
  const auto f = gguf::File::from_memory(bytes.data(), bytes.size());
  std::vector<std::string> out;
  for (const auto& kv : f->metadata()) out.push_back(kv.first);
  return out;
}

struct Arch {
  const char* name;
  std::function<gguf::Writer()> make;
  // Keys with a default: without them the model loads, or (when the default is not what the
  // base model has) the first tensor that disagrees with the default is named.
  std::set<std::string> keys_with_defaults;
  std::set<std::string> optional_tensors;  // as in llama.cpp's loaders (TENSOR_NOT_REQUIRED)
};

std::vector<Arch> archs() {
  return {
      {"qwen3", [] { return make_model::tiny_qwen3_writer(); },
       {"qwen3.context_length", "qwen3.attention.head_count_kv", "qwen3.attention.key_length",
        "qwen3.attention.value_length", "qwen3.rope.freq_base", "qwen3.attention.layer_norm_rms_epsilon"},
       {"output.weight"}},  // absent: the output head is tied to token_embd
      {"qwen35", [] { return make_model::tiny_qwen35_writer(); },
       {"qwen35.context_length", "qwen35.attention.head_count_kv", "qwen35.attention.key_length",
        "qwen35.attention.value_length", "qwen35.rope.freq_base", "qwen35.attention.layer_norm_rms_epsilon",
        "qwen35.rope.dimension_sections", "qwen35.rope.dimension_count", "qwen35.full_attention_interval",
        "qwen35.nextn_predict_layers"},
       {"output.weight", "blk.2.nextn.shared_head_norm.weight"}},
  };
}

TEST_F(ModelLoad, TheBaseModelsLoadAndRun) {
  for (const Arch& a : archs()) EXPECT_EQ(load(a.make(), {}), "") << a.name;
}

TEST_F(ModelLoad, EveryMissingTensorIsNamed) {
  for (const Arch& a : archs()) {
    const gguf::Writer w = a.make();
    for (const std::string& t : tensor_names(w)) {
      Edits e;
      e.drop_tensors = {t};
      const std::string err = load(w, e);
      if (a.optional_tensors.count(t)) {
        EXPECT_EQ(err, "") << a.name << ": without " << t;
        continue;
      }
      EXPECT_NE(err.find("'" + t + "'"), std::string::npos) << a.name << ": without " << t << ": '" << err << "'";
    }
  }
}

TEST_F(ModelLoad, EveryMissingRequiredKeyIsNamed) {
  for (const Arch& a : archs()) {
    const gguf::Writer w = a.make();
    for (const std::string& k : key_names(w)) {
      if (k == "general.name" || k == "general.file_type") continue;  // informational
      Edits e;
      e.drop_keys = {k};
      const std::string err = load(w, e);
      if (a.keys_with_defaults.count(k)) {
        EXPECT_TRUE(err.empty() || err.find("tensor '") != std::string::npos) << a.name << ": without " << k << ": " << err;
        continue;
      }
      EXPECT_NE(err.find("'" + k + "'"), std::string::npos) << a.name << ": without " << k << ": '" << err << "'";
    }
  }
}

// A tensor one row or one block of columns larger than the hyperparameters say.
TEST_F(ModelLoad, EveryShapeMismatchIsNamed) {
  for (const Arch& a : archs()) {
    const gguf::Writer w = a.make();
    for (const std::string& name : tensor_names(w)) {
      for (int dim = 0; dim < 2; ++dim) {
        Edits e;
        bool edited = false;
        e.tensor_edit = [&](gguf::TensorInfo& t, std::vector<uint8_t>& d) {
          if (t.name != name || dim >= static_cast<int>(t.ne.size())) return;
          // one more row, or 8 more columns (one more block for block types)
          t.ne[dim] += dim == 1 ? 1 : std::max<int64_t>(8, type_info(t.type).block_elems);
          int64_t rows = 1;
          for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
          d.assign(row_bytes(t.type, t.ne[0]) * static_cast<size_t>(rows), 0);
          edited = true;
        };
        const std::string err = load(w, e);
        if (!edited) continue;
        // token_embd's rows define the vocabulary: the output head then disagrees with it.
        const std::string named = name == "token_embd.weight" && dim == 1 ? "output.weight" : name;
        EXPECT_NE(err.find("'" + named + "'"), std::string::npos)
            << a.name << ": " << name << " larger in dim " << dim << ": '" << err << "'";
        EXPECT_NE(err.find("expected"), std::string::npos) << err;
      }
    }
  }
}

// The hyperparameters changed instead: the first tensor they disagree with is named.
TEST_F(ModelLoad, HyperparametersThatDisagreeWithTheTensorsNameATensor) {
  struct Case {
    std::string key;
    uint32_t value;
    std::string tensor;
  };
  const std::vector<Case> cases = {
      {"qwen3.embedding_length", 48, "token_embd.weight"},
      {"qwen3.feed_forward_length", 96, "blk.0.ffn_gate.weight"},
      {"qwen3.attention.head_count", 4, "blk.0.attn_q.weight"},
      {"qwen3.block_count", 3, "blk.2.attn_norm.weight"},
  };
  for (const Case& c : cases) {
    Edits e;
    e.set_keys = {{c.key, gguf::make_u32(c.value)}};
    const std::string err = load(make_model::tiny_qwen3_writer(), e);
    EXPECT_NE(err.find("'" + c.tensor + "'"), std::string::npos) << c.key << " = " << c.value << ": '" << err << "'";
  }
}

TEST_F(ModelLoad, ATypeTheBuildCannotComputeWithIsNamed) {
  std::string unsupported;
  for (uint32_t id = 0; id < 64 && unsupported.empty(); ++id) {
    const auto ti = type_info(id);
    if (!ti || ti->supported || 32 % ti->block_elems != 0) continue;
    Edits e;
    e.tensor_edit = [&](gguf::TensorInfo& t, std::vector<uint8_t>& d) {
      if (t.name != "blk.0.attn_q.weight") return;
      t.type = static_cast<GgmlType>(id);
      d.assign(row_bytes(t.type, t.ne[0]) * static_cast<size_t>(t.ne[1]), 0);
    };
    const std::string err = load(make_model::tiny_qwen3_writer(), e);
    EXPECT_NE(err.find("'blk.0.attn_q.weight'"), std::string::npos) << err;
    EXPECT_NE(err.find(std::string(ti->name)), std::string::npos) << err;
    unsupported = ti->name;
  }
  if (unsupported.empty()) GTEST_SKIP() << "every known type with 32-element rows is supported";
}

TEST_F(ModelLoad, AnUnknownArchitectureIsNamed) {
  Edits e;
  e.set_keys = {{"general.architecture", gguf::make_string("llama9")}};
  EXPECT_NE(load(make_model::tiny_qwen3_writer(), e).find("'llama9'"), std::string::npos);
}

// Sizes far beyond any model are refused before a loader multiplies them (found by fuzz_model:
// head_count * key_length overflowed int64 in the qwen35 loader).
TEST_F(ModelLoad, ImplausibleSizesAreNamedBeforeAnyProductOverflows) {
  struct Case {
    bool qwen35;
    std::string key;
    gguf::Value v;
  };
  const std::vector<Case> cases = {
      {false, "qwen3.attention.head_count", gguf::make_u32(0xFFFFFFFFu)},
      {false, "qwen3.attention.key_length", gguf::make_u64(uint64_t{1} << 62)},
      {false, "qwen3.embedding_length", gguf::make_i64(int64_t{1} << 40)},
      {true, "qwen35.attention.key_length", gguf::make_u32(1u << 31)},
      {true, "qwen35.ssm.state_size", gguf::make_u32(1u << 24)},
      {true, "qwen35.rope.dimension_sections", gguf::make_array(std::vector<int32_t>{1 << 30, 1 << 30, 2, 0})},
  };
  for (const Case& c : cases) {
    Edits e;
    e.set_keys = {{c.key, c.v}};
    const std::string err = load(c.qwen35 ? make_model::tiny_qwen35_writer() : make_model::tiny_qwen3_writer(), e);
    EXPECT_NE(err.find("'" + c.key + "'"), std::string::npos) << err;
    EXPECT_NE(err.find("out of range"), std::string::npos) << err;
  }
  // A long context is not a size: it loads.
  Edits e;
  e.set_keys = {{"qwen3.context_length", gguf::make_u64(uint64_t{1} << 40)}};
  EXPECT_EQ(load(make_model::tiny_qwen3_writer(), e), "");
}

}  // namespace
}  // namespace df
