// Tests that need the llama.cpp reference (its source tree's vocab files, its libraries) call
// DF_REFERENCE_MISSING(why) when it is not there. A developer's run skips the test with `why`
// (ctest lists it as not run); in CI (CI=true, as .ci/run sets it) or with
// DF_REQUIRE_REFERENCE=1 the test fails with `why`, so a CI run cannot pass without the
// reference having been checked. Tests that skip for other reasons (no GPU, an ISA the CPU
// lacks) use GTEST_SKIP directly.
#pragma once
#include <cstdlib>
#include <cstring>

namespace df::testing {

inline bool reference_required() {
  const char* ci = std::getenv("CI");
  const char* req = std::getenv("DF_REQUIRE_REFERENCE");
  return (ci && std::strcmp(ci, "true") == 0) || (req && std::strcmp(req, "1") == 0);
}

}  // namespace df::testing

// A macro because GTEST_SKIP and FAIL return from the test body.
#define DF_REFERENCE_MISSING(why)                                                              \
  do {                                                                                         \
    if (::df::testing::reference_required())                                                   \
      FAIL() << "llama.cpp reference missing (required: CI=true or DF_REQUIRE_REFERENCE=1): " \
             << why;                                                                           \
    GTEST_SKIP() << "llama.cpp reference missing: " << why;                                    \
  } while (0)
