#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "runtime/sampler.h"

namespace df {
namespace {

TEST(Sampler, ArgmaxTakesLowestIndexOnTies) {
  const std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  EXPECT_EQ(argmax(l.data(), 5), 1);
  SamplerOptions o;
  o.temperature = 0.0f;
  Sampler s(o);
  EXPECT_EQ(s.sample(l.data(), 5), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
  const std::vector<float> l = {0.1f, 0.3f, 3.0f, 0.2f};
  SamplerOptions o;
  o.temperature = 1.5f;
  o.top_k = 1;
  o.seed = 7;
  Sampler s(o);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l.data(), 4), 2);
}

TEST(Sampler, SameSeedSameDraws) {
  std::vector<float> l(100);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 37) % 11) * 0.3f;
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = 123;
  Sampler a(o), b(o);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.sample(l.data(), 100), b.sample(l.data(), 100));
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  // p = softmax([0, ln 3]) = [0.25, 0.75]
  const std::vector<float> l = {0.0f, std::log(3.0f)};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  o.seed = 1;
  Sampler s(o);
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(l.data(), 2);
  EXPECT_NEAR(static_cast<double>(ones) / n, 0.75, 0.015);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // probabilities ~ [0.6, 0.3, 0.07, 0.03]
  const std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.07f), std::log(0.03f)};
  SamplerOptions o;
  o.temperature = 1.0f;
  o.top_k = 0;
  o.top_p = 0.85f;  // keeps the first two
  o.min_p = 0.0f;
  o.seed = 3;
  Sampler s(o);
  std::map<int, int> seen;
  for (int i = 0; i < 5000; ++i) seen[s.sample(l.data(), 4)]++;
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_EQ(seen.count(3), 0u);
  o.top_p = 1.0f;
  o.min_p = 0.2f;  // keeps p >= 0.12: the first two
  Sampler m(o);
  seen.clear();
  for (int i = 0; i < 5000; ++i) seen[m.sample(l.data(), 4)]++;
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_GT(seen[1], 0);
}

}  // namespace
}  // namespace df
