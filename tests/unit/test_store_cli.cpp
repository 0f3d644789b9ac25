// The store's CLI end to end: import, models (text and JSON), -m NAME in run and tokenize
// (--store and $DISKFORMER_HOME), rm, and the errors for unknown names and non-GGUF imports.
// (Downloads are tested in tests/unit against a loopback server.)
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "model_fixture.h"
#include "test_util.h"

namespace df {
namespace {

const std::string kModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";
const std::string kCli = DF_CLI;

TEST(StoreCli, ImportListRunRemove) {
  const std::string store = modeltest::work_dir() + "/store_cli";
  std::filesystem::remove_all(store);
  const std::string s = " --store " + store;
  const std::string imported = testutil::run(kCli + " import " + kModel + " --name tiny" + s);
  EXPECT_NE(imported.find("tiny: " + store + "/tiny.gguf"), std::string::npos) << imported;

  const auto list = nlohmann::json::parse(testutil::run(kCli + " models --output json" + s));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "tiny");
  EXPECT_EQ(list[0]["kind"], "import");
  EXPECT_EQ(list[0]["size"], std::filesystem::file_size(kModel));
  EXPECT_EQ(list[0]["sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(testutil::run(kCli + " models" + s).find("tiny"), std::string::npos);

  const std::string args = " -p 'def add(a, b):' -n 6 --temp 0 -q -t 1 --output json 2>/dev/null";
  const auto by_name = nlohmann::json::parse(testutil::run(kCli + " run -m tiny" + s + args));
  const auto by_path = nlohmann::json::parse(testutil::run(kCli + " run -m " + kModel + args));
  EXPECT_EQ(by_name["model"], store + "/tiny.gguf");
  EXPECT_EQ(by_name["tokens"], by_path["tokens"]);
  EXPECT_EQ(testutil::run("DISKFORMER_HOME=" + store + " " + kCli + " tokenize -m tiny -p 'hello world'"),
            testutil::run(kCli + " tokenize -m " + kModel + " -p 'hello world'"));

  EXPECT_NE(testutil::run(kCli + " rm tiny" + s).find("removed tiny"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(testutil::run(kCli + " models --output json" + s)).size(), 0u);
  EXPECT_THROW(testutil::run(kCli + " run -m tiny" + s + args), std::runtime_error);
  EXPECT_THROW(testutil::run(kCli + " rm tiny" + s + " 2>/dev/null"), std::runtime_error);
  EXPECT_THROW(testutil::run(kCli + " import " + std::string(DF_SOURCE_DIR) + "/README.md" + s + " 2>/dev/null"),
               std::runtime_error);
  EXPECT_EQ(nlohmann::json::parse(testutil::run(kCli + " models --output json" + s)).size(), 0u);
  std::filesystem::remove_all(store);
}

// README: "--store DIR, else $DISKFORMER_HOME, else ~/.cache/diskformer".
TEST(StoreCli, StoreFolderIsFlagThenEnvironmentThenHomeCache) {
  const std::string root = modeltest::work_dir() + "/store_dirs";
  std::filesystem::remove_all(root);
  const std::string model = modeltest::make_model("store_dirs_tiny", modeltest::kQwen3Args);
  const std::string env = "HOME=" + root + "/home DISKFORMER_HOME=" + root + "/env ";
  testutil::run(env + kCli + " import " + model + " --name a --store " + root + "/flag");
  testutil::run(env + kCli + " import " + model + " --name b");
  testutil::run("HOME=" + root + "/home DISKFORMER_HOME= " + kCli + " import " + model + " --name c");
  EXPECT_TRUE(std::filesystem::exists(root + "/flag/a.gguf"));
  EXPECT_TRUE(std::filesystem::exists(root + "/env/b.gguf"));
  EXPECT_TRUE(std::filesystem::exists(root + "/home/.cache/diskformer/c.gguf"));
  EXPECT_FALSE(std::filesystem::exists(root + "/env/a.gguf"));
  EXPECT_FALSE(std::filesystem::exists(root + "/home/.cache/diskformer/b.gguf"));
  // -m NAME looks where the import went.
  EXPECT_NE(testutil::run("HOME=" + root + "/home DISKFORMER_HOME= " + kCli + " inspect c").find("qwen3"),
            std::string::npos);
  std::filesystem::remove_all(root);
}

TEST(StoreCli, DryRunShowsThePlanWithoutFetching) {
  const auto j = nlohmann::json::parse(testutil::run(kCli + " pull ternary-bonsai-2-27b-mtp --dry-run --output json"));
  EXPECT_EQ(j["url"],
            "https://huggingface.co/CaryPalmer/Ternary-Bonsai-2-27B-262k-GGUF/resolve/"
            "9f9b92cd8229cb13e473ca3d11055c3f60276508/Ternary-Bonsai-2-27B-PTQ1_0-mtp-procreations.gguf");
  EXPECT_EQ(j["size"], 6397970272ull);
  EXPECT_EQ(j["tensors"], nlohmann::json({"blk.64.*", "output_norm.weight"}));
  EXPECT_EQ(j["ranges"], nlohmann::json::parse("[[289240928, 20480], [5946650464, 451319808]]"));
  const std::string text = testutil::run(kCli + " pull hf://o/r@abc/m.gguf --sha256 " + std::string(64, 'A') + " --dry-run");
  EXPECT_NE(text.find("https://huggingface.co/o/r/resolve/abc/m.gguf"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(64, 'a')), std::string::npos) << text;
  EXPECT_THROW(testutil::run(kCli + " pull no-such-preset --dry-run 2>/dev/null"), std::runtime_error);
}

}  // namespace
}  // namespace df
