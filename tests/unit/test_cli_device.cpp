// `--device` on the CLI: cpu and auto run; cuda in a build without the CUDA backend (or on a
// machine without a GPU) is a clear error with a non-zero exit.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "test_util.h"

namespace df {
namespace {

// Exit status and output of `diskformer run <flags>` on the default model.
std::pair<int, std::string> run_cli(const std::string& flags) {
  auto r = testutil::run_status(std::string(DF_CLI) + " run -q -t 1 -n 2 --temp 0 -p 'def f(' " + flags + " 2>&1");
  return {r.rc, std::move(r.out)};
}

TEST(CliDevice, CpuAndAutoRun) {
  for (const char* d : {"cpu", "auto"}) {
    const auto [rc, out] = run_cli(std::string("--device ") + d);
    EXPECT_EQ(rc, 0) << d << ": " << out;
  }
}

TEST(CliDevice, CudaWithoutTheBackendIsAClearError) {
  const auto [rc, out] = run_cli("--device cuda");
  if (rc == 0) GTEST_SKIP() << "this build has the CUDA backend and sees a GPU";
  EXPECT_TRUE(out.find("this build has no CUDA backend") != std::string::npos ||
              out.find("no CUDA GPU found") != std::string::npos)
      << out;
  const auto [rc2, out2] = run_cli("--device tpu");
  EXPECT_NE(rc2, 0) << out2;
}

}  // namespace
}  // namespace df
