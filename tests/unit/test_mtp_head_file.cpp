// --mtp-head FILE (EngineOptions::mtp_head_path): the default model (a qwen35 trunk with a
// trained MTP layer) split by range reads from a loopback server into a trunk without nextn
// layers (`pull --tensors token_embd.weight 'output*' 'blk.[0-7].*'`, which the store writes as
// a trunk: block_count 8, no nextn_predict_layers) and a head (`pull --tensors 'blk.8.*'`). The trunk alone has no head and decodes as the original; the trunk plus
// the head file drafts exactly what the original's own head drafts (same acceptance counts)
// and decodes token-identically. Heads that do not fit (shapes, block index, architecture,
// hyperparameters, no head at all) are errors naming the file and the tensor or key. The CLI
// (`pull --tensors`, `run --mtp-head NAME`, `bench --mtp-head`) end to end.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "diskformer/engine.h"
#include "gguf/gguf.h"
#include "http_test_server.h"
#include "model_fixture.h"
#include "spec/mtp_generator.h"
#include "store/pull.h"
#include "store/store.h"
#include "store_test_util.h"

namespace df {
namespace {

namespace fs = std::filesystem;
using test::TestHttpServer;

// A copy of a GGUF file with one metadata key set to `v`.
void write_with_key(const std::string& in, const std::string& out, const std::string& key, gguf::Value v) {
  auto f = gguf::File::open(in);
  gguf::Writer w;
  for (const auto& [k, old] : f->metadata()) w.set(k, k == key ? v : old);
  for (const gguf::TensorInfo& t : f->tensors()) w.add_tensor(t.name, t.type, t.ne, f->tensor_data(t), t.nbytes);
  w.write(out);
}

std::unique_ptr<Engine> load(const std::string& model, const std::string& head = "") {
  EngineOptions eo;
  eo.model_path = model;
  eo.mtp_head_path = head;
  eo.device = "cpu";
  eo.cpu.threads = 2;
  eo.n_ctx = 256;
  eo.prefill_chunk = 64;
  return Engine::load(eo);
}

GenerateOptions greedy(int64_t n) {
  GenerateOptions g;
  g.sampling.temperature = 0.0f;
  g.max_new_tokens = n;
  g.stop_at_eog = false;
  return g;
}

std::vector<Token> plain(Engine& e, const std::vector<Token>& prompt, int64_t n) {
  Session s(e);
  return s.generate(prompt, greedy(n), {});
}

std::vector<Token> speculative(Engine& e, const std::vector<Token>& prompt, int64_t n, spec::SpecStats& st) {
  spec::SpecOptions so;
  so.mode = spec::SpecMode::MTP;
  so.draft_max = 3;
  so.draft_fixed = true;
  Session s(e, so.draft_max + 1);
  spec::MtpGenerator gen(s, greedy(n), so);
  std::vector<Token> out = gen.run(prompt, {});
  st = gen.stats();
  return out;
}

std::string heldout_slice(size_t at, size_t n) {
  std::ifstream f(std::string(DF_SOURCE_DIR) + "/models/heldout.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str().substr(at, n);
}

// Expects f() to throw a df::Error whose message holds every one of `parts`.
template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << parts[0];
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

class MtpHeadFile : public ::testing::Test {
 protected:
  void SetUp() override {
    server.serve("default.gguf", std::make_shared<std::vector<uint8_t>>(test::read_bytes(modeltest::default_model())));
    trunk = pull("trunk", {"token_embd.weight", "output*", "blk.[0-7].*"});
  }
  // `pull URL --tensors P...` into the test's store; returns the file's path.
  std::string pull(const std::string& name, std::vector<std::string> patterns) {
    store::PullRequest r;
    r.spec = server.url("default.gguf");
    r.name = name;
    r.tensors = std::move(patterns);
    store::pull(st, r, test::fast_transfer());
    return st.model_path(name);
  }
  std::string pull_head() { return pull("head", {"blk.8.*"}); }
  TestHttpServer server;
  test::TempDir dir;
  store::Store st{dir.path};
  std::string trunk;
};

TEST_F(MtpHeadFile, TrunkPlusPulledHeadDraftsAndDecodesAsTheOriginal) {
  const std::string head = pull_head();
  {
    // The head: only blk.8, with the source's metadata. The trunk: every other tensor, and
    // metadata saying it is a trunk of 8 layers without nextn layers (the rest as the source's).
    auto h = gguf::File::open(head);
    auto t = gguf::File::open(trunk);
    auto full = gguf::File::open(modeltest::default_model());
    ASSERT_GT(h->tensors().size(), 8u);
    for (const auto& x : h->tensors()) EXPECT_EQ(x.name.rfind("blk.8.", 0), 0u) << x.name;
    EXPECT_EQ(h->tensors().size() + t->tensors().size(), full->tensors().size());
    EXPECT_LT(h->file_size(), full->file_size() / 2);
    EXPECT_EQ(h->get_u64("qwen35.block_count"), 9u);
    EXPECT_EQ(t->get_u64("qwen35.block_count"), 8u);
    EXPECT_FALSE(t->has("qwen35.nextn_predict_layers"));
    EXPECT_EQ(t->metadata().size() + 1, full->metadata().size());
    for (const auto& [k, v] : t->metadata()) {
      if (k != "qwen35.block_count") {
        EXPECT_TRUE(*full->find(k) == v) << k;
      }
    }
  }
  auto full = load(modeltest::default_model());
  auto bare = load(trunk);
  auto joined = load(trunk, head);
  auto replaced = load(modeltest::default_model(), head);  // the file's own head replaced by the same
  ASSERT_NE(full->model().mtp(), nullptr);
  EXPECT_EQ(bare->model().mtp(), nullptr);  // the split trunk has no nextn layer
  ASSERT_NE(joined->model().mtp(), nullptr);
  EXPECT_EQ(bare->info().n_layer, full->info().n_layer);

  int64_t accepted = 0;
  for (size_t at : {5000u, 90000u}) {
    const auto prompt = full->tokenizer().encode(heldout_slice(at, 200), false);
    const int64_t n = 33;
    const auto ref = plain(*full, prompt, n);
    EXPECT_EQ(plain(*bare, prompt, n), ref);
    spec::SpecStats s_full, s_joined, s_replaced;
    EXPECT_EQ(speculative(*full, prompt, n, s_full), ref);
    EXPECT_EQ(speculative(*joined, prompt, n, s_joined), ref);
    EXPECT_EQ(speculative(*replaced, prompt, n, s_replaced), ref);
    // The same head on the same hidden states: the same drafts, so the same acceptance.
    EXPECT_GT(s_joined.drafted, 0);
    EXPECT_EQ(s_joined.drafted, s_full.drafted);
    EXPECT_EQ(s_joined.accepted, s_full.accepted);
    EXPECT_EQ(s_joined.accepted_at, s_full.accepted_at);
    EXPECT_EQ(s_replaced.accepted_at, s_full.accepted_at);
    accepted += s_joined.accepted;
  }
  EXPECT_GT(accepted, 0);  // the trained head's drafts are accepted, not only drafted
}

// qwen35moe: the head block's FFN is a MoE FFN; split and joined the same way.
TEST_F(MtpHeadFile, MoeTrunkPlusPulledHeadDraftsAsTheOriginal) {
  const std::string moe = modeltest::make_model("mtp_head_moe", std::string(modeltest::kQwen35MoeArgs) + " --mtp-layers 1");
  server.serve("moe.gguf", std::make_shared<std::vector<uint8_t>>(test::read_bytes(moe)));
  auto pull_moe = [&](const std::string& name, std::vector<std::string> patterns) {
    store::PullRequest r;
    r.spec = server.url("moe.gguf");
    r.name = name;
    r.tensors = std::move(patterns);
    store::pull(st, r, test::fast_transfer());
    return st.model_path(name);
  };
  const std::string moe_trunk = pull_moe("moe_trunk", {"token_embd.weight", "output*", "blk.[0-3].*"});
  const std::string moe_head = pull_moe("moe_head", {"blk.4.*"});
  auto full = load(moe);
  auto bare = load(moe_trunk);
  auto joined = load(moe_trunk, moe_head);
  EXPECT_EQ(bare->model().mtp(), nullptr);
  ASSERT_NE(joined->model().mtp(), nullptr);
  const std::vector<Token> prompt = {5, 9, 14, 2, 77, 31, 8};
  const auto ref = plain(*full, prompt, 21);
  EXPECT_EQ(plain(*bare, prompt, 21), ref);
  spec::SpecStats s_full, s_joined;
  EXPECT_EQ(speculative(*full, prompt, 21, s_full), ref);
  EXPECT_EQ(speculative(*joined, prompt, 21, s_joined), ref);
  EXPECT_GT(s_joined.drafted, 0);
  EXPECT_EQ(s_joined.drafted_at, s_full.drafted_at);
  EXPECT_EQ(s_joined.accepted_at, s_full.accepted_at);
}

TEST_F(MtpHeadFile, HeadsThatDoNotFitAreErrorsNamingTheTensorOrKey) {
  const std::string head = pull_head();
  // A head of the same depth but another width: the first tensor of blk.8 does not fit.
  const std::string narrow = modeltest::make_model(
      "mtp_head_narrow",
      "--arch qwen35 --layers 8 --dim 64 --ff 128 --heads 2 --kv-heads 1 --head-dim 64 --ssm-state 32 "
      "--ssm-k-heads 1 --ssm-v-heads 2 --untied --type f32 --seed 3 --mtp-layers 1");
  expect_error([&] { load(trunk, narrow); }, {"mtp_head_narrow.gguf", "does not fit", "'blk.8.", "[64]", "[384]"});
  // A head of a trunk of another depth.
  const std::string shallow = modeltest::make_model("mtp_head_shallow", std::string(modeltest::kQwen35Args) + " --mtp-layers 1");
  expect_error([&] { load(trunk, shallow); }, {"mtp_head_shallow.gguf", "blk.4", "8 trunk layers", "blk.8"});
  // No head at all (the trunk itself), another architecture, a trunk that cannot take one.
  expect_error([&] { load(trunk, trunk); }, {"trunk.gguf", "holds no MTP head", "nextn.eh_proj"});
  const std::string qwen3 = modeltest::make_model("mtp_head_qwen3", modeltest::kQwen3Args);
  expect_error([&] { load(trunk, qwen3); }, {"architecture 'qwen3'"});
  expect_error([&] { load(qwen3, head); }, {"'qwen3' has no MTP head"});
  // Hyperparameters that no shape shows.
  const std::string rope = modeltest::work_dir() + "/head_rope.gguf";
  write_with_key(head, rope, "qwen35.rope.freq_base", gguf::make_f32(500000.0f));
  expect_error([&] { load(trunk, rope); }, {"head_rope.gguf", "qwen35.rope.freq_base"});
  const std::string eps = modeltest::work_dir() + "/head_eps.gguf";
  write_with_key(head, eps, "qwen35.attention.layer_norm_rms_epsilon", gguf::make_f32(1e-5f));
  expect_error([&] { load(trunk, eps); }, {"layer_norm_rms_epsilon"});
  // The file that fits still loads.
  EXPECT_NE(load(trunk, head)->model().mtp(), nullptr);
}

// The CLI: pull the head through the loopback server, run the trunk with the stored head.
TEST_F(MtpHeadFile, CliPullThenRunAndBenchWithTheHead) {
  const std::string s = " --store " + dir.path;
  const std::string pulled = testutil::run(std::string(DF_CLI) + " pull " + server.url("default.gguf") +
                                                    " --tensors 'blk.8.*' --name head -q" + s + " 2>&1");
  EXPECT_NE(pulled.find("head: " + dir.path + "/head.gguf"), std::string::npos) << pulled;
  const std::string args =
      " -p 'def add(a, b):\n    return' -n 24 --temp 0 -q -t 1 --draft-max 3 --draft-fixed --output json 2>/dev/null";
  const auto ref = nlohmann::json::parse(
      testutil::run(std::string(DF_CLI) + " run -m " + modeltest::default_model() + " --spec none" + args));
  const auto got = nlohmann::json::parse(
      testutil::run(std::string(DF_CLI) + " run -m " + trunk + " --mtp-head head --spec mtp" + s + args));
  EXPECT_EQ(got["tokens"], ref["tokens"]);
  ASSERT_TRUE(got["stats"].contains("spec")) << got.dump();
  EXPECT_GT(got["stats"]["spec"]["drafted"].get<int64_t>(), 0);
  // Without the head the trunk cannot draft; with a head that does not fit, a non-zero exit.
  EXPECT_THROW(testutil::run(std::string(DF_CLI) + " run -m " + trunk + " --spec mtp" + args), std::runtime_error);
  try {
    testutil::run(std::string(DF_CLI) + " run -m " + trunk + " --mtp-head " + trunk + " -p x -n 1 -q 2>&1");
    ADD_FAILURE() << "a head file without a head was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds no MTP head"), std::string::npos) << e.what();
  }
  try {
    testutil::run(std::string(DF_CLI) + " run -m " + trunk + " --mtp-head " + DF_SOURCE_DIR +
                           "/README.md -p x -n 1 -q 2>&1");
    ADD_FAILURE() << "a head file that is no GGUF was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the MTP head file: GGUF file"), std::string::npos) << e.what();
  }
  const auto bench = nlohmann::json::parse(testutil::run(
      std::string(DF_CLI) + " bench -m " + trunk + " --mtp-head head" + s +
      " --spec mtp --draft-fixed -p 8 -n 16 -r 1 -t 1 --output json 2>/dev/null"));
  ASSERT_TRUE(bench.contains("spec")) << bench.dump();
  EXPECT_GT(bench["spec"]["drafted"].get<int64_t>(), 0);
}

}  // namespace
}  // namespace df
