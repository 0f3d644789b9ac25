// SPEC resolution without fetching: the presets carry the seeds' pinned sources, hf:// specs
// map to Hugging Face download addresses of their revision, URLs pass through, pins merge.
#include <gtest/gtest.h>

#include "common/error.h"
#include "store/pull.h"
#include "store/source.h"

namespace df::store {
namespace {

TEST(StoreSpec, PresetsAreTheSeedsPinnedSources) {
  const Source q = resolve_spec("qwen3-4b-q8_0");
  EXPECT_EQ(q.url,
            "https://huggingface.co/Qwen/Qwen3-4B-GGUF/resolve/bc640142c66e1fdd12af0bd68f40445458f3869b/"
            "Qwen3-4B-Q8_0.gguf");
  EXPECT_EQ(q.size, 4280404704ull);
  EXPECT_EQ(q.sha256, "8c2f07f26af9747e41988551106f149b03eb9b5cb6df636027b6bf6278473300");
  EXPECT_TRUE(q.tensors.empty());
  EXPECT_EQ(q.name, "qwen3-4b-q8_0");

  const Source u = resolve_spec("underdog-saluki-27b-iq2");
  EXPECT_EQ(u.url,
            "https://huggingface.co/ConwayResearch/Underdog-Saluki-27B-1.0/resolve/"
            "1336c0b5d74dfe6ad7f793577092f5effd9f97c6/Underdog-Saluki-27B-1.0-IQ2-mix.gguf");
  EXPECT_EQ(u.size, 7898369152ull);
  EXPECT_EQ(u.sha256, "4a673518b11b1c4445f9b9a9d3c40356f5ba39f6a6260dcb25f3fbfd475d9efb");

  // MTP_HEAD.url of engines/ternary_bonsai_2_mtp.js, verbatim; no sha256 there: the size pins it.
  const Source m = resolve_spec("ternary-bonsai-2-27b-mtp");
  EXPECT_EQ(m.url,
            "https://huggingface.co/CaryPalmer/Ternary-Bonsai-2-27B-262k-GGUF/resolve/"
            "9f9b92cd8229cb13e473ca3d11055c3f60276508/Ternary-Bonsai-2-27B-PTQ1_0-mtp-procreations.gguf");
  EXPECT_EQ(m.size, 6397970272ull);
  EXPECT_TRUE(m.sha256.empty());
  EXPECT_EQ(m.tensors, (std::vector<std::string>{"blk.64.*", "output_norm.weight"}));
  // MTP_HEAD.ranges: output_norm.weight, then blk.64 to the end of the file.
  EXPECT_EQ(m.ranges, (std::vector<ByteRange>{{289240928ull, 20480ull}, {5946650464ull, 451319808ull}}));
  EXPECT_EQ(m.ranges[1].offset + m.ranges[1].length, *m.size);
  EXPECT_TRUE(q.ranges.empty());
  EXPECT_EQ(presets().size(), 3u);
}

TEST(StoreSpec, HuggingFaceSpecs) {
  const Source s = resolve_spec("hf://Qwen/Qwen3-4B-GGUF@bc640142c66e1fdd12af0bd68f40445458f3869b/Qwen3-4B-Q8_0.gguf");
  EXPECT_EQ(s.url, resolve_spec("qwen3-4b-q8_0").url);
  EXPECT_EQ(s.repo, "Qwen/Qwen3-4B-GGUF");
  EXPECT_EQ(s.revision, "bc640142c66e1fdd12af0bd68f40445458f3869b");
  EXPECT_EQ(s.name, "Qwen3-4B-Q8_0");
  EXPECT_FALSE(s.size.has_value());
  EXPECT_EQ(resolve_spec("hf://a/b@v1/sub/dir/m.gguf").url, "https://huggingface.co/a/b/resolve/v1/sub/dir/m.gguf");
  EXPECT_EQ(resolve_spec("hf://a/b/m.gguf").url, "https://huggingface.co/a/b/resolve/main/m.gguf");
  for (const char* bad : {"hf://", "hf://a", "hf://a/b", "hf://a/b@/m.gguf", "hf:///b/m.gguf", "hf://a/b@x/",
                          "hf://a/b@r/m m.gguf"})
    EXPECT_THROW(resolve_spec(bad), Error) << bad;
}

TEST(StoreSpec, UrlsAndErrors) {
  const Source s = resolve_spec("https://example.com/x/Model-Q8.gguf?download=1");
  EXPECT_EQ(s.url, "https://example.com/x/Model-Q8.gguf?download=1");
  EXPECT_EQ(s.name, "Model-Q8");
  EXPECT_TRUE(s.preset.empty());
  EXPECT_FALSE(s.size.has_value());
  EXPECT_EQ(resolve_spec("http://127.0.0.1:8080/m.gguf").name, "m");
  for (const char* bad : {"", "no-such-preset", "ftp://host/m.gguf", "file:///tmp/m.gguf", "https://",
                          "https:///m.gguf", "http://host/a b.gguf"})
    EXPECT_THROW(resolve_spec(bad), Error) << bad;
  try {
    resolve_spec("qwen3-4b");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ternary-bonsai-2-27b-mtp"), std::string::npos) << e.what();
  }
}

TEST(StoreSpec, PinsMergeWithPresets) {
  PullRequest r;
  r.spec = "qwen3-4b-q8_0";
  PullPlan p = plan_pull(r);
  EXPECT_EQ(p.name, "qwen3-4b-q8_0");
  EXPECT_EQ(p.source.sha256, "8c2f07f26af9747e41988551106f149b03eb9b5cb6df636027b6bf6278473300");
  EXPECT_TRUE(p.tensors.empty());
  r.sha256 = "8C2F07F26AF9747E41988551106F149B03EB9B5CB6DF636027B6BF6278473300";  // same, upper case
  EXPECT_EQ(plan_pull(r).source.sha256, p.source.sha256);
  r.sha256 = std::string(64, 'a');
  EXPECT_THROW(plan_pull(r), Error);
  r.sha256 = "1234";
  EXPECT_THROW(plan_pull(r), Error);
  r.sha256.clear();
  r.size = 1;
  EXPECT_THROW(plan_pull(r), Error);
  r.size = 4280404704ull;
  EXPECT_NO_THROW(plan_pull(r));
  r.name = "../evil";
  EXPECT_THROW(plan_pull(r), Error);
  r.name = "";
  r.tensors = {"output.weight"};  // a range read of a whole-file preset: its digest cannot apply
  p = plan_pull(r);
  EXPECT_TRUE(p.source.sha256.empty());
  EXPECT_EQ(p.source.size, 4280404704ull);

  PullRequest m;
  m.spec = "ternary-bonsai-2-27b-mtp";
  p = plan_pull(m);
  EXPECT_EQ(p.tensors, (std::vector<std::string>{"blk.64.*", "output_norm.weight"}));
  EXPECT_EQ(p.ranges.size(), 2u);
  EXPECT_EQ(p.source.size, 6397970272ull);
  m.tensors = {"blk.64.nextn.*"};  // other patterns: the preset's ranges do not apply
  EXPECT_EQ(plan_pull(m).tensors, m.tensors);
  EXPECT_TRUE(plan_pull(m).ranges.empty());
  m.sha256 = std::string(64, 'b');
  EXPECT_THROW(plan_pull(m), Error);
}

TEST(StoreSpec, Names) {
  EXPECT_TRUE(valid_name("qwen3-4b-q8_0"));
  EXPECT_TRUE(valid_name("A.b_c-1"));
  for (const char* bad : {"", ".hidden", "-x", "a/b", "a b", "..", "x\\y"}) EXPECT_FALSE(valid_name(bad)) << bad;
  EXPECT_FALSE(valid_name(std::string(129, 'a')));
  EXPECT_EQ(name_from_file("dir/Qwen3-4B-Q8_0.gguf"), "Qwen3-4B-Q8_0");
  EXPECT_EQ(name_from_file("m.gguf?x=1"), "m");
  EXPECT_EQ(name_from_file("My Model+1.bin"), "My_Model_1.bin");
  EXPECT_EQ(name_from_file(""), "model");
}

}  // namespace
}  // namespace df::store
