// The CLI's exit codes and messages for bad input, driving the built binary: a missing model
// or prompt file, a truncated or corrupt GGUF, an unknown tensor type, a missing tensor, a
// prompt longer than the context, a text too short for perplexity, and bad flag values. Each
// must exit non-zero with a message that names the problem; a good command exits 0 (so the
// harness itself is checked).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

const std::string kCli = DF_CLI;
const std::string kModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";

using Result = df::testutil::CommandResult;

Result run(const std::string& args) { return df::testutil::run_status(kCli + " " + args + " 2>&1 </dev/null"); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("df_cli_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    df::testutil::write_file(path, bytes);
    return path;
  }
  // Exits with code 1 and a message containing every one of `want`; never a crash.
  void expect_error(const std::string& args, const std::vector<std::string>& want) {
    const Result r = run(args);
    EXPECT_EQ(r.rc, 1) << args << "\n" << r.out;
    EXPECT_NE(r.out.find("diskformer: error: "), std::string::npos) << args << "\n" << r.out;
    for (const auto& w : want) EXPECT_NE(r.out.find(w), std::string::npos) << args << ": no '" << w << "' in\n" << r.out;
  }
  fs::path dir_;
};

TEST_F(Cli, AGoodCommandExitsZero) {
  const Result r = run("tokenize -m " + kModel + " -p 'def f(x):'");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find('['), std::string::npos) << r.out;
  const Result g = run("run -q -m " + kModel + " -p 'import os' -n 2 --temp 0 -c 64");
  EXPECT_EQ(g.rc, 0) << g.out;
}

TEST_F(Cli, MissingFiles) {
  const std::string nope = (dir_ / "nope.gguf").string();
  expect_error("run -q -m " + nope + " -p hi -n 1", {"no file", nope});  // -m: neither a file nor a stored name
  expect_error("inspect " + nope, {"no file", nope});
  const std::string no_prompt = (dir_ / "nope.txt").string();
  expect_error("run -q -m " + kModel + " -f " + no_prompt + " -n 1", {"cannot open", no_prompt});
}

TEST_F(Cli, TruncatedAndCorruptFiles) {
  const std::string model = df::testutil::read_file(kModel);
  ASSERT_GT(model.size(), 1u << 20);
  // Cut in the metadata, and cut in the tensor data.
  const std::string head = write("head.gguf", model.substr(0, 4096));
  expect_error("run -q -m " + head + " -p hi -n 1", {"cannot fit in the remaining", head});
  const std::string body = write("body.gguf", model.substr(0, model.size() - 100000));
  expect_error("run -q -m " + body + " -p hi -n 1", {"past the end"});
  std::string bad = model;
  bad.replace(0, 4, "GGUX");
  const std::string magic = write("magic.gguf", bad);
  expect_error("run -q -m " + magic + " -p hi -n 1", {"bad magic", magic});
  expect_error("inspect " + magic, {"bad magic"});
  const std::string empty = write("empty.gguf", "");
  expect_error("run -q -m " + empty + " -p hi -n 1", {"truncated"});
}

// The byte offset of the GGUF tensor-info entry named `name` (its length-prefixed name).
size_t tensor_info_at(const std::string& file, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t n = name.size();
  for (int i = 0; i < 8; ++i) key[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  key += name;
  return file.find(key);
}

TEST_F(Cli, UnknownTensorTypeAndMissingTensor) {
  const std::string model = df::testutil::read_file(kModel);
  const std::string name = "output_norm.weight";
  const size_t at = tensor_info_at(model, name);
  ASSERT_NE(at, std::string::npos);
  // entry: u64 name length, name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset
  const size_t dims_at = at + 8 + name.size();
  const uint32_t n_dims = static_cast<uint8_t>(model[dims_at]);
  ASSERT_GE(n_dims, 1u);
  ASSERT_LE(n_dims, 4u);
  std::string bad = model;
  bad[dims_at + 4 + 8 * n_dims] = 99;  // ggml type ids stop well below 99
  const std::string typed = write("type99.gguf", bad);
  expect_error("run -q -m " + typed + " -p hi -n 1", {"unknown type id 99", name});
  bad = model;
  bad[at + 8 + name.size() - 1] = 'X';  // "output_norm.weighX"
  const std::string renamed = write("renamed.gguf", bad);
  expect_error("run -q -m " + renamed + " -p hi -n 1", {"missing required tensor 'output_norm.weight'"});
}

TEST_F(Cli, PromptLongerThanTheContext) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "x = " + std::to_string(i) + "\n";
  const std::string prompt = write("long.txt", text);
  expect_error("run -q -m " + kModel + " -f " + prompt + " -c 32 -n 1", {"tokens, more than the context of 32"});
  expect_error("logits -q -m " + kModel + " -f " + prompt + " -c 32 -o " + (dir_ / "l.f32").string(),
               {"more than the context of 32"});
  expect_error("perplexity -q -m " + kModel + " -f " + prompt + " -c 512", {"needs at least 1024"});
}

// CLI11 rejects these before anything runs: non-zero exit and a message naming the flag.
TEST_F(Cli, BadFlagValues) {
  struct Case {
    std::string args, names;
  };
  const std::vector<Case> cases = {
      {"run -p hi -c 0", "--ctx-size"},
      {"run -p hi -c many", "--ctx-size"},
      {"run -p hi -t -2", "--threads"},
      {"run -p hi -b 0", "--batch-size"},
      {"run -p hi --temp -1", "--temp"},
      {"run -p hi --top-p 1.5", "--top-p"},
      {"run -p hi --min-p -0.1", "--min-p"},
      {"run -p hi --top-k -3", "--top-k"},
      {"run -p hi -n -1", "--n-predict"},
      {"run -p hi --isa sse9", "--isa"},
      {"run -p hi --output yaml", "--output"},
      {"run -p hi --bogus", "--bogus"},
      {"run -p hi -f x.txt", "prompt"},  // -p and -f are exclusive
      {"run", "prompt"},                 // neither
      {"perplexity -m " + kModel, "--file"},
      {"frobnicate -p hi", "unknown command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_NE(r.rc, 0) << c.args << "\n" << r.out;
    EXPECT_LT(r.rc, 128) << c.args << " crashed\n" << r.out;
    EXPECT_NE(r.out.find(c.names), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
