// The model store's downloads against a loopback server with injected faults: resume after a
// dropped connection (only the missing bytes cross the wire), restart when Range is ignored,
// 404 / 416 / 503 / wrong Content-Length / slow server, sha256 and size pins (a mismatch
// leaves nothing behind), records, listing, removal, import and -m NAME resolution.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "http_test_server.h"
#include "store/file_io.h"
#include "store/pull.h"
#include "store/store.h"
#include "store_test_util.h"

namespace df::store {
namespace {

namespace fs = std::filesystem;
using test::TestHttpServer;

class StoreDownload : public ::testing::Test {
 protected:
  void SetUp() override {
    file = test::make_test_gguf(6, 20000, 7);  // ~480 KB
    sha = test::sha256_of(*file);
    server.serve("m.gguf", file);
  }
  PullRequest request(const std::string& name = "m") const {
    PullRequest r;
    r.spec = server.url("m.gguf");
    r.name = name;
    r.size = file->size();
    r.sha256 = sha;
    return r;
  }
  void expect_stored(const std::string& name) {
    auto rec = store.find(name);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->sha256, sha);
    EXPECT_EQ(rec->size, file->size());
    EXPECT_EQ(test::read_bytes(store.model_path(name)), *file);
    EXPECT_FALSE(fs::exists(store.part_path(name)));
  }
  void expect_nothing_stored(const std::string& name) {
    EXPECT_FALSE(store.find(name).has_value());
    EXPECT_FALSE(fs::exists(store.model_path(name)));
    EXPECT_FALSE(fs::exists(store.part_path(name)));
    EXPECT_FALSE(fs::exists(store.record_path(name)));
    EXPECT_TRUE(store.list().empty());
  }
  TestHttpServer server;
  test::TempDir dir;
  Store store{dir.path};
  std::shared_ptr<std::vector<uint8_t>> file;
  std::string sha;
};

TEST_F(StoreDownload, WholeFileWithRecord) {
  const PullResult r = pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(server.body_bytes_sent(), file->size());
  EXPECT_EQ(r.record.kind, "download");
  EXPECT_EQ(r.record.source, server.url("m.gguf"));
  EXPECT_EQ(r.record.date.size(), 20u);  // 2026-12-01T08:00:00Z
  const auto list = store.list();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "m");
  // The record on disk is JSON with the fields of the issue.
  const auto j = nlohmann::json::parse(test::read_bytes(store.record_path("m")));
  for (const char* k : {"name", "source", "size", "sha256", "date"}) EXPECT_TRUE(j.contains(k)) << k;
  // Pulling the same again fetches nothing; a different source under the same name is refused.
  const auto sent = server.body_bytes_sent();
  EXPECT_TRUE(pull(store, request(), test::fast_transfer()).already_present);
  EXPECT_EQ(server.body_bytes_sent(), sent);
  PullRequest other = request();
  other.spec = server.url("other.gguf");
  other.sha256.clear();
  other.size.reset();
  EXPECT_THROW(pull(store, other, test::fast_transfer()), Error);
}

TEST_F(StoreDownload, DroppedConnectionResumesWithinOnePull) {
  TestHttpServer::Faults f;
  f.drop_requests = 2;
  f.drop_after = 100000;
  server.set_faults(f);
  const PullResult r = pull(store, request(), test::fast_transfer());
  expect_stored("m");
  // Two dropped responses of 100000 bytes, then the rest: no byte crossed the wire twice.
  EXPECT_EQ(server.body_bytes_sent(), file->size());
  EXPECT_EQ(r.transferred, file->size());
  const auto ranges = server.range_headers();
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=100000-");
  EXPECT_EQ(ranges[2], "bytes=200000-");
}

TEST_F(StoreDownload, InterruptedPullResumesInTheNextOne) {
  TestHttpServer::Faults f;
  f.drop_requests = 1;
  f.drop_after = 123457;
  server.set_faults(f);
  auto opt = test::fast_transfer();
  opt.http.max_retries = 0;  // the first pull gives up, as a killed process would stop
  EXPECT_THROW(pull(store, request(), opt), Error);
  // The partial download is kept beside the target but is no model: not listed, not resolved.
  EXPECT_EQ(fs::file_size(store.part_path("m")), 123457u);
  EXPECT_FALSE(store.find("m").has_value());
  EXPECT_TRUE(store.list().empty());
  EXPECT_THROW(resolve_model("m", dir.path), Error);

  server.reset_counters();
  const PullResult r = pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(r.resumed_from, 123457u);
  EXPECT_EQ(server.body_bytes_sent(), file->size() - 123457u);  // only the missing bytes
  ASSERT_EQ(server.range_headers().size(), 1u);
  EXPECT_EQ(server.range_headers()[0], "bytes=123457-");
}

TEST_F(StoreDownload, ServerIgnoringRangeRestartsTheFile) {
  // A stale part of 5000 bytes; the server answers its Range request with 200 and everything.
  test::write_bytes(store.part_path("m"), file->data(), 5000);
  TestHttpServer::Faults f;
  f.ignore_range_requests = 1;
  server.set_faults(f);
  const PullResult r = pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(r.restarts, 1);
  EXPECT_EQ(server.body_bytes_sent(), file->size());
}

TEST_F(StoreDownload, GarbageInThePartIsCaughtBySha) {
  // A part whose bytes do not belong to the file: resumed, then rejected by the pinned sha256.
  std::vector<uint8_t> junk(5000, 0xab);
  test::write_bytes(store.part_path("m"), junk.data(), junk.size());
  try {
    pull(store, request(), test::fast_transfer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sha256 mismatch"), std::string::npos) << e.what();
  }
  expect_nothing_stored("m");
}

TEST_F(StoreDownload, CompletePartIsFinishedWithoutTransfer) {
  // A download that ended before its rename: the Range request past the end gets 416.
  test::write_bytes(store.part_path("m"), file->data(), file->size());
  pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(server.body_bytes_sent(), 0u);
}

TEST_F(StoreDownload, Forced416RestartsAPart) {
  test::write_bytes(store.part_path("m"), file->data(), 1000);
  TestHttpServer::Faults f;
  f.status_requests = 1;
  f.status = 416;
  server.set_faults(f);
  const PullResult r = pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(r.restarts, 1);
}

TEST_F(StoreDownload, NotFoundIsAnErrorAndLeavesNothing) {
  PullRequest r = request();
  r.spec = server.url("missing.gguf");
  try {
    pull(store, r, test::fast_transfer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 404"), std::string::npos) << e.what();
  }
  expect_nothing_stored("m");
  EXPECT_EQ(server.requests(), 1);  // a 404 is not retried
}

TEST_F(StoreDownload, ServiceUnavailableIsRetried) {
  TestHttpServer::Faults f;
  f.status_requests = 2;
  f.status = 503;
  server.set_faults(f);
  pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(server.requests(), 3);
  // More failures in a row than retries: a clear error, nothing left.
  test::TempDir d2;
  Store s2(d2.path);
  f.status_requests = 10;
  server.set_faults(f);
  EXPECT_THROW(pull(s2, request(), test::fast_transfer()), Error);
  EXPECT_TRUE(s2.list().empty());
  EXPECT_FALSE(fs::exists(s2.part_path("m")));
}

TEST_F(StoreDownload, ShortContentLengthIsResumed) {
  TestHttpServer::Faults f;
  f.wrong_length_requests = 1;
  f.content_length_delta = -70000;  // announces and sends 70000 bytes too few, cleanly
  server.set_faults(f);
  pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(server.body_bytes_sent(), file->size());
  ASSERT_EQ(server.range_headers().size(), 2u);
  EXPECT_EQ(server.range_headers()[1], "bytes=" + std::to_string(file->size() - 70000) + "-");
}

TEST_F(StoreDownload, LongContentLengthIsResumedOrRejected) {
  TestHttpServer::Faults f;
  f.wrong_length_requests = 1;
  f.content_length_delta = 1000;  // announces more than it has, sends all, closes
  server.set_faults(f);
  pull(store, request(), test::fast_transfer());
  expect_stored("m");
  EXPECT_EQ(server.body_bytes_sent(), file->size());
  // Unpinned, the announced (wrong) length is believed at first; the resumed request past the
  // real end gets 416 with the real size, which ends the download.
  test::TempDir d2;
  Store s2(d2.path);
  server.set_faults(f);
  PullRequest r = request("m2");
  r.size.reset();
  r.sha256.clear();
  const PullResult res = pull(s2, r, test::fast_transfer());
  EXPECT_EQ(res.record.sha256, sha);
  EXPECT_EQ(test::read_bytes(s2.model_path("m2")), *file);
}

TEST_F(StoreDownload, SlowServerReportsRateAndEta) {
  TestHttpServer::Faults f;
  f.chunk = 32768;
  f.chunk_delay_ms = 5;  // ~15 chunks, ~75 ms
  server.set_faults(f);
  auto opt = test::fast_transfer();
  std::vector<Progress> seen;
  opt.on_progress = [&](const Progress& p) { seen.push_back(p); };
  pull(store, request(), opt);
  expect_stored("m");
  ASSERT_GE(seen.size(), 10u);
  EXPECT_TRUE(seen.back().finished);
  EXPECT_EQ(seen.back().done, file->size());
  const Progress& mid = seen[seen.size() / 2];
  EXPECT_EQ(mid.total, file->size());
  EXPECT_GT(mid.done, 0u);
  EXPECT_LT(mid.done, file->size());
  const std::string line = progress_line("m", mid);
  EXPECT_NE(line.find("/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;
  EXPECT_NE(line.find('%'), std::string::npos) << line;
}

TEST_F(StoreDownload, StalledServerTimesOutAndResumes) {
  // The first response stops sending after 50000 bytes and keeps the connection open; the
  // low-speed limit (1 s below 200 kB/s, curl's rate over its last seconds) aborts it and the
  // retry resumes at byte 50000.
  TestHttpServer::Faults f;
  f.stall_requests = 1;
  f.stall_after = 50000;
  f.stall_ms = 5000;
  server.set_faults(f);
  auto opt = test::fast_transfer();
  opt.http.low_speed_time_s = 1;
  opt.http.low_speed_bytes = 200000;
  pull(store, request(), opt);
  expect_stored("m");
  EXPECT_EQ(server.body_bytes_sent(), file->size());
  ASSERT_EQ(server.range_headers().size(), 2u);
  EXPECT_EQ(server.range_headers()[1], "bytes=50000-");
}

TEST_F(StoreDownload, ShaMismatchLeavesNothing) {
  PullRequest r = request();
  r.sha256 = std::string(64, '0');
  try {
    pull(store, r, test::fast_transfer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sha256 mismatch"), std::string::npos) << e.what();
  }
  expect_nothing_stored("m");
}

TEST_F(StoreDownload, SizeMismatchLeavesNothing) {
  PullRequest r = request();
  r.size = file->size() + 1;
  r.sha256.clear();
  try {
    pull(store, r, test::fast_transfer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos) << e.what();
  }
  expect_nothing_stored("m");
  r.size = file->size() - 1;  // smaller than the file: the server sends more than pinned
  EXPECT_THROW(pull(store, r, test::fast_transfer()), Error);
  expect_nothing_stored("m");
}

TEST_F(StoreDownload, NotAGgufIsRejected) {
  auto junk = std::make_shared<std::vector<uint8_t>>(4096, uint8_t{7});
  server.serve("junk.gguf", junk);
  PullRequest r;
  r.spec = server.url("junk.gguf");
  try {
    pull(store, r, test::fast_transfer());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a valid GGUF"), std::string::npos) << e.what();
  }
  expect_nothing_stored("junk");
}

TEST_F(StoreDownload, RemoveImportAndResolve) {
  pull(store, request(), test::fast_transfer());
  EXPECT_EQ(resolve_model("m", dir.path), store.model_path("m"));
  // An existing path wins over a name.
  EXPECT_EQ(resolve_model(store.model_path("m"), dir.path), store.model_path("m"));
  EXPECT_THROW(resolve_model("nope", dir.path), Error);
  store.remove("m");
  EXPECT_TRUE(store.list().empty());
  EXPECT_FALSE(fs::exists(store.model_path("m")));
  EXPECT_THROW(store.remove("m"), Error);

  // import: hashed, recorded; a file that is not GGUF is refused and leaves nothing.
  test::TempDir src;
  const std::string good = src.path + "/x.gguf", bad = src.path + "/bad.gguf";
  test::write_bytes(good, file->data(), file->size());
  const std::vector<uint8_t> trunc(file->begin(), file->begin() + 100000);
  test::write_bytes(bad, trunc.data(), trunc.size());
  const Record r = store.import_file(good, "x");
  EXPECT_EQ(r.sha256, sha);
  EXPECT_EQ(r.kind, "import");
  EXPECT_EQ(resolve_model("x", dir.path), store.model_path("x"));
  EXPECT_THROW(store.import_file(bad, "bad"), Error);
  EXPECT_FALSE(store.find("bad"));
  EXPECT_FALSE(fs::exists(store.part_path("bad")));
  EXPECT_THROW(store.import_file(good, "x"), Error);  // the name is taken
  EXPECT_THROW(store.import_file(good, "../x"), Error);
}

TEST(StoreDir, FlagThenEnvironmentThenHome) {
  EXPECT_EQ(Store::default_dir("/a/b"), "/a/b");
  const char* old = std::getenv("DISKFORMER_HOME");
  const std::string saved = old ? old : "";
  setenv("DISKFORMER_HOME", "/env/store", 1);
  EXPECT_EQ(Store::default_dir(""), "/env/store");
  unsetenv("DISKFORMER_HOME");
  if (const char* home = std::getenv("HOME"); home && *home)
    EXPECT_EQ(Store::default_dir(""), std::string(home) + "/.cache/diskformer");
  else
    EXPECT_THROW(Store::default_dir(""), Error);
  if (old) setenv("DISKFORMER_HOME", saved.c_str(), 1);
}

TEST(StoreFiles, DiskFullIsAClearError) {
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  const std::vector<uint8_t> b(4096, 1);
  try {
    write_all(fd, b.data(), b.size(), "model.gguf.part", 1 << 30);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("disk full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1.0 GiB still to come"), std::string::npos) << e.what();
  }
  ::close(fd);
  test::TempDir d;
  EXPECT_THROW(require_free_space(d.path, UINT64_MAX / 2, "a model"), Error);
}

TEST(StoreFiles, PartFileIsLocked) {
  test::TempDir d;
  PartFile a(d.path + "/x.part");
  EXPECT_THROW(PartFile b(d.path + "/x.part"), Error);
}

}  // namespace
}  // namespace df::store
