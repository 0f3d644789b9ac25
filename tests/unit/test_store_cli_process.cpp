// The store's CLI as a process, against the loopback server: `diskformer pull` stopped by
// Ctrl-C (SIGINT: a clean stop, exit 1, the part kept) and by a kill (SIGKILL: the part
// kept), then resumed by the next pull with only the missing bytes crossing the wire; and
// `serve -m NAME --store DIR` serving a stored model by name.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_server.h"
#include "model_fixture.h"
#include "store/store.h"
#include "store_test_util.h"

namespace df {
namespace {

namespace fs = std::filesystem;
using test::TestHttpServer;
using Clock = std::chrono::steady_clock;

// A shell command run as a child process (exec'd, so signals reach the command itself).
class Child {
 public:
  explicit Child(const std::string& cmd) {
    pid_ = fork();
    if (pid_ == 0) {
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void signal(int sig) const { kill(pid_, sig); }
  // The wait status once the process ended; -1 (the process killed) when it has not ended
  // within `seconds`: a child that hangs fails the test instead of hanging it.
  int wait(double seconds = 60) {
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) return -1;  // the destructor kills it
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

// Polls until pred() holds or `seconds` passed.
template <class P>
bool eventually(P&& pred, double seconds) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

std::string text_of(const std::string& path) {  // "" while the file is missing
  const auto b = test::read_bytes(path);
  return std::string(b.begin(), b.end());
}

uint64_t size_or_0(const std::string& p) {
  std::error_code ec;
  const auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

TEST(StoreCliProcess, CtrlCAndKillKeepThePartAndTheNextPullResumes) {
  auto file = test::make_test_gguf(4, 50000, 11);  // ~800 KB
  TestHttpServer server;
  server.serve("m.gguf", file);
  test::TempDir dir;
  store::Store st(dir.path);
  const std::string part = st.part_path("m");
  const std::string log = dir.path + "/pull.log";
  const std::string pull = std::string(DF_CLI) + " pull " + server.url("m.gguf") + " --name m -q --store " + dir.path +
                           " --sha256 " + test::sha256_of(*file) + " 2>" + log;
  TestHttpServer::Faults slow;
  slow.chunk = 4096;
  slow.chunk_delay_ms = 20;  // ~200 KB/s: several seconds for the file
  server.set_faults(slow);

  // Ctrl-C: the transfer stops, the part is kept, exit 1 with a message saying so.
  uint64_t after_int = 0;
  {
    Child c(pull);
    ASSERT_TRUE(eventually([&] { return size_or_0(part) > 20000; }, 20)) << "no bytes arrived";
    c.signal(SIGINT);
    const int status = c.wait();
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 1);
    const std::string err = text_of(log);
    EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
    EXPECT_NE(err.find("is kept"), std::string::npos) << err;
    after_int = size_or_0(part);
    EXPECT_GT(after_int, 20000u);
    EXPECT_LT(after_int, file->size());
    EXPECT_FALSE(st.find("m").has_value());  // a partial download is no model
  }
  // A killed process: the part is kept as far as it got; the next pull resumes from there.
  uint64_t after_kill = 0;
  {
    server.reset_counters();
    Child c(pull);
    ASSERT_TRUE(eventually([&] { return size_or_0(part) > after_int + 20000; }, 20)) << "the pull did not resume";
    c.signal(SIGKILL);
    const int status = c.wait();
    EXPECT_TRUE(WIFSIGNALED(status));
    ASSERT_EQ(server.range_headers().size(), 1u);
    EXPECT_EQ(server.range_headers()[0], "bytes=" + std::to_string(after_int) + "-");
    after_kill = size_or_0(part);
    EXPECT_LT(after_kill, file->size());
  }
  // The server notices the dead connection at its next send or two (chunks 20 ms apart):
  // let it, so that those bytes are not counted as the next pull's.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.set_faults({});
  server.reset_counters();
  const std::string out = testutil::run(pull.substr(0, pull.find(" 2>")) + " --output json");
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["resumed_from"].get<uint64_t>(), after_kill);
  EXPECT_EQ(server.body_bytes_sent(), file->size() - after_kill);  // only the missing bytes
  EXPECT_EQ(test::read_bytes(st.model_path("m")), *file);
  EXPECT_FALSE(fs::exists(part));
}

TEST(StoreCliProcess, ServeAStoredModelByName) {
  test::TempDir dir;
  store::Store st(dir.path);
  st.import_file(modeltest::default_model(), "tiny");
  const std::string out = dir.path + "/serve.out";
  Child c(std::string(DF_CLI) + " serve -m tiny --store " + dir.path + " --port 0 -q -t 1 -c 128 >" + out + " 2>&1");
  std::string text;
  ASSERT_TRUE(eventually(
      [&] {
        text = text_of(out);
        return text.find("on http://") != std::string::npos || text.find("error") != std::string::npos;
      },
      60))
      << text;
  EXPECT_NE(text.find("serving 'tiny'"), std::string::npos) << text;
  c.signal(SIGTERM);
  const int status = c.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << text;
}

}  // namespace
}  // namespace df
