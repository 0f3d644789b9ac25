// Range reads of single tensors (pull --tensors) from a loopback server: the remote header
// read in growing prefixes, only the matching tensors transferred, a local GGUF whose tensor
// bytes equal the source's and whose metadata is the source's, resumption, and a model
// pulled this way loading and generating the same tokens as the original. Also the GGUF
// pieces it needs: parsing a header from a prefix, the writer's layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "common/error.h"
#include "diskformer/engine.h"
#include "http_test_server.h"
#include "store/pull.h"
#include "store/store.h"
#include "store/tensor_pull.h"
#include "store_test_util.h"

namespace df::store {
namespace {

namespace fs = std::filesystem;
using test::TestHttpServer;

const std::string kDefaultModel = std::string(DF_SOURCE_DIR) + "/models/default.gguf";

std::shared_ptr<std::vector<uint8_t>> default_model_bytes() {
  static auto b = std::make_shared<std::vector<uint8_t>>(test::read_bytes(kDefaultModel));
  return b;
}

// Every tensor of `local` has the bytes, type and shape of the same tensor of `src`, and the
// metadata is the source's; returns the tensor names.
std::set<std::string> expect_tensors_equal(const gguf::File& local, const gguf::File& src) {
  std::set<std::string> names;
  for (const gguf::TensorInfo& t : local.tensors()) {
    const gguf::TensorInfo* s = src.find_tensor(t.name);
    EXPECT_NE(s, nullptr) << t.name;
    if (!s) continue;
    EXPECT_EQ(t.type, s->type) << t.name;
    EXPECT_EQ(t.ne, s->ne) << t.name;
    EXPECT_EQ(t.nbytes, s->nbytes) << t.name;
    EXPECT_EQ(0, std::memcmp(local.tensor_data(t), src.tensor_data(*s), t.nbytes)) << t.name;
    names.insert(t.name);
  }
  EXPECT_EQ(local.metadata().size(), src.metadata().size());
  for (const auto& [k, v] : src.metadata()) {
    const gguf::Value* l = local.find(k);
    EXPECT_TRUE(l && *l == v) << k;
  }
  return names;
}

std::set<std::string> matching(const gguf::File& f, const std::vector<std::string>& patterns) {
  std::set<std::string> out;
  for (const auto& t : f.tensors())
    if (tensor_name_matches(t.name, patterns)) out.insert(t.name);
  return out;
}

class StoreTensors : public ::testing::Test {
 protected:
  void SetUp() override { server.serve("default.gguf", default_model_bytes()); }
  PullRequest request(std::vector<std::string> patterns, const std::string& name) const {
    PullRequest r;
    r.spec = server.url("default.gguf");
    r.name = name;
    r.tensors = std::move(patterns);
    r.size = default_model_bytes()->size();
    return r;
  }
  TestHttpServer server;
  test::TempDir dir;
  Store store{dir.path};
};

TEST_F(StoreTensors, OnlyTheMatchingTensorsCrossTheWire) {
  // Like the seed's MTP head: the last block and the trunk's output norm.
  const std::vector<std::string> patterns = {"blk.8.*", "output_norm.weight"};
  auto opt = test::fast_transfer();
  opt.first_header_read = 4096;  // the header is larger: read in growing prefixes
  const PullResult r = pull(store, request(patterns, "head"), opt);
  EXPECT_EQ(r.record.kind, "tensors");
  EXPECT_EQ(r.record.tensors, patterns);
  EXPECT_EQ(r.record.source_size, default_model_bytes()->size());

  auto src = gguf::File::open(kDefaultModel);
  auto local = gguf::File::open(store.model_path("head"));
  const auto want = matching(*src, patterns);
  ASSERT_GT(want.size(), 5u);
  EXPECT_EQ(expect_tensors_equal(*local, *src), want);
  EXPECT_EQ(r.record.sha256, test::sha256_of(test::read_bytes(store.model_path("head"))));

  // Bytes sent = the header, read in prefixes growing from 4 KiB, + the chosen tensors: far
  // less than the file.
  uint64_t tensor_bytes = 0;
  for (const auto& n : want) tensor_bytes += src->tensor(n).nbytes;
  EXPECT_GE(r.header_bytes, src->data_offset() - 32);  // (the data section's padding may be skipped)
  EXPECT_LE(r.header_bytes, 2 * src->data_offset());
  EXPECT_EQ(server.body_bytes_sent(), r.header_bytes + tensor_bytes);
  EXPECT_LT(server.body_bytes_sent(), default_model_bytes()->size() / 4);
  EXPECT_GT(server.requests(), static_cast<int>(want.size()) + 2);  // several header reads
  for (const auto& h : server.range_headers()) EXPECT_EQ(h.rfind("bytes=", 0), 0u) << h;
}

TEST_F(StoreTensors, AModelPulledThisWayRuns) {
  pull(store, request({"*"}, "tiny"), test::fast_transfer());
  auto src = gguf::File::open(kDefaultModel);
  auto local = gguf::File::open(store.model_path("tiny"));
  EXPECT_EQ(expect_tensors_equal(*local, *src).size(), src->tensors().size());

  auto greedy = [](const std::string& path) {
    EngineOptions o;
    o.model_path = path;
    o.cpu.threads = 1;
    o.n_ctx = 64;
    auto e = Engine::load(o);
    Session s(*e);
    GenerateOptions g;
    g.max_new_tokens = 6;
    g.stop_at_eog = false;
    return s.generate(e->tokenizer().encode("def add(a, b):\n", true), g, [](Token) { return true; });
  };
  const std::vector<Token> got = greedy(resolve_model("tiny", dir.path));
  EXPECT_EQ(got.size(), 6u);
  EXPECT_EQ(got, greedy(kDefaultModel));
}

TEST_F(StoreTensors, InterruptedTensorPullResumes) {
  TestHttpServer::Faults f;
  f.drop_requests = 3;  // the header read and the first tensor reads are cut short
  f.drop_after = 3000;
  server.set_faults(f);
  auto opt = test::fast_transfer();
  opt.http.max_retries = 0;
  const std::vector<std::string> patterns = {"blk.8.*"};
  EXPECT_THROW(pull(store, request(patterns, "part"), opt), Error);
  EXPECT_FALSE(store.find("part"));
  EXPECT_FALSE(fs::exists(store.part_path("part")));  // the header was not read: nothing kept
  f.pass_requests = 1;  // the header read passes, the first tensor read is cut
  f.drop_requests = 1;
  f.drop_after = 1000;
  server.set_faults(f);
  // Fails again, further along (inside a tensor), and keeps its part.
  EXPECT_THROW(pull(store, request(patterns, "part"), opt), Error);
  ASSERT_TRUE(fs::exists(store.part_path("part")));
  const uint64_t kept = fs::file_size(store.part_path("part"));
  server.reset_counters();
  const PullResult r = pull(store, request(patterns, "part"), test::fast_transfer());
  EXPECT_EQ(r.resumed_from, kept);
  auto src = gguf::File::open(kDefaultModel);
  auto local = gguf::File::open(store.model_path("part"));
  EXPECT_EQ(expect_tensors_equal(*local, *src), matching(*src, patterns));
  // The resumed pull re-reads the header, then only the tensor bytes that the part lacked.
  uint64_t missing = 0;
  for (const gguf::TensorInfo& t : local->tensors()) {
    const uint64_t b = local->data_offset() + t.offset, e = b + t.nbytes;
    if (e > kept) missing += e - std::max(b, kept);
  }
  EXPECT_GT(kept, local->data_offset());
  EXPECT_GT(missing, 0u);
  EXPECT_EQ(server.body_bytes_sent(), r.header_bytes + missing);
  EXPECT_EQ(r.transferred, r.header_bytes + missing);
}

TEST_F(StoreTensors, BadPatternsAndServersAreErrors) {
  auto opt = test::fast_transfer();
  try {
    pull(store, request({"blk.8.*", "no.such.*"}, "x"), opt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'no.such.*' matches none"), std::string::npos) << e.what();
  }
  TestHttpServer::Faults f;
  f.ignore_range_requests = 1;
  server.set_faults(f);
  try {
    pull(store, request({"*"}, "x"), opt);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ignores Range"), std::string::npos) << e.what();
  }
  PullRequest wrong = request({"*"}, "x");
  wrong.size = 12345;
  EXPECT_THROW(pull(store, wrong, opt), Error);
  PullRequest with_sha = request({"*"}, "x");
  with_sha.sha256 = std::string(64, 'a');
  EXPECT_THROW(pull(store, with_sha, opt), Error);
  EXPECT_TRUE(store.list().empty());
}

TEST_F(StoreTensors, PinnedRangesAreCheckedBeforeDownloading) {
  auto src = gguf::File::open(kDefaultModel);
  const std::vector<std::string> patterns = {"blk.8.*", "output_norm.weight"};
  std::vector<const gguf::TensorInfo*> chosen;
  for (const auto& t : src->tensors())
    if (tensor_name_matches(t.name, patterns)) chosen.push_back(&t);
  const std::vector<ByteRange> ranges = tensor_extents(*src, chosen);
  // The MTP layer is one contiguous block at the end, output_norm lies elsewhere.
  ASSERT_EQ(ranges.size(), 2u);
  uint64_t covered = 0;
  for (const auto& r : ranges) covered += r.length;
  uint64_t bytes = 0;
  for (const auto* t : chosen) bytes += t->nbytes;
  EXPECT_GE(covered, bytes);
  EXPECT_LT(covered, bytes + chosen.size() * src->alignment());

  const auto size = default_model_bytes()->size();
  test::TempDir d;
  auto r = pull_tensors(server.url("default.gguf"), d.path + "/a.part", patterns, size, test::fast_transfer(), ranges);
  EXPECT_EQ(r.tensors.size(), chosen.size());
  std::vector<ByteRange> off = ranges;
  off[1].offset += 32;
  server.reset_counters();
  try {
    pull_tensors(server.url("default.gguf"), d.path + "/b.part", patterns, size, test::fast_transfer(), off);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pinned at"), std::string::npos) << e.what();
  }
  EXPECT_EQ(server.requests(), 1);  // the header only
  EXPECT_FALSE(fs::exists(d.path + "/b.part"));
}

TEST(StoreGlob, Patterns) {
  EXPECT_TRUE(tensor_name_matches("blk.64.attn_q.weight", {"blk.64.*"}));
  EXPECT_FALSE(tensor_name_matches("blk.6.attn_q.weight", {"blk.64.*"}));
  EXPECT_TRUE(tensor_name_matches("output_norm.weight", {"blk.64.*", "output_norm.weight"}));
  EXPECT_FALSE(tensor_name_matches("output_norm.bias", {"output_norm.weight"}));
  EXPECT_TRUE(tensor_name_matches("blk.3.ffn_up.weight", {"blk.[0-3].ffn_*"}));
  EXPECT_TRUE(tensor_name_matches("a.b", {"a?b"}));
}

TEST(GgufHeaderPrefix, ParsesFromAPrefixAndAsksForMore) {
  const auto bytes = test::make_test_gguf(3, 64, 1);
  auto full = gguf::File::from_memory(bytes->data(), bytes->size());
  const uint64_t header = full->data_offset();
  // Too short: HeaderTruncated with a need beyond what was given.
  for (size_t n : {size_t{0}, size_t{10}, size_t{40}, static_cast<size_t>(header / 2)}) {
    try {
      gguf::File::header_from_memory(bytes->data(), n, bytes->size());
      ADD_FAILURE() << n;
    } catch (const gguf::HeaderTruncated& e) {
      EXPECT_GT(e.needed, n);
    }
  }
  // Enough: the same infos and metadata, no data.
  auto h = gguf::File::header_from_memory(bytes->data(), header, bytes->size());
  EXPECT_FALSE(h->has_data());
  EXPECT_EQ(h->data_offset(), header);
  EXPECT_EQ(h->file_size(), bytes->size());
  ASSERT_EQ(h->tensors().size(), 3u);
  EXPECT_EQ(h->tensors()[2].offset, full->tensors()[2].offset);
  EXPECT_EQ(h->metadata().size(), full->metadata().size());
  EXPECT_THROW(h->tensor_data(h->tensors()[0]), Error);
  // A declared file size too small for the tensors is a plain error, not a request for more.
  try {
    gguf::File::header_from_memory(bytes->data(), header, bytes->size() - 100);
    ADD_FAILURE();
  } catch (const gguf::HeaderTruncated&) {
    ADD_FAILURE() << "HeaderTruncated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past the end"), std::string::npos) << e.what();
  }
}

TEST(GgufWriterLayout, MatchesToBytes) {
  std::vector<float> a(64, 1.f), b(96, 2.f);
  gguf::Writer w, p;
  for (gguf::Writer* x : {&w, &p}) x->set_string("general.architecture", "test");
  w.add_tensor("a", GgmlType::F32, {64}, a.data(), a.size() * 4);
  w.add_tensor("b", GgmlType::F32, {96}, b.data(), b.size() * 4);
  p.add_tensor_info("a", GgmlType::F32, {64});
  p.add_tensor_info("b", GgmlType::F32, {96});
  const auto bytes = w.to_bytes();
  const auto l = p.layout();
  EXPECT_EQ(l.file_size, bytes.size());
  ASSERT_LE(l.meta.size(), bytes.size());
  EXPECT_TRUE(std::equal(l.meta.begin(), l.meta.end(), bytes.begin()));
  ASSERT_EQ(l.tensors.size(), 2u);
  EXPECT_EQ(l.tensors[1].offset, 256u);  // 64 floats, padded to 32
  EXPECT_THROW(p.to_bytes(), Error);
  EXPECT_THROW(p.add_tensor_info("c", GgmlType::Q8_0, {33}), Error);
}

}  // namespace
}  // namespace df::store
