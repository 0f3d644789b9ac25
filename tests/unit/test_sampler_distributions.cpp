// The sampler's draws follow the distribution each option defines. For fixed logits with known
// probabilities q (logits = ln q), the expected distribution after temperature, top-k, top-p or
// min-p is written out by hand below; 40000 draws with a fixed seed are compared with it by
// Pearson's chi-square statistic, bounded by the 0.999 quantile of chi-square with k - 1
// degrees of freedom, and tokens the option removes must never be drawn. A sampler that
// ignores the option draws from another distribution and fails the bound by a wide margin
// (each expected distribution differs from the unfiltered one by >= 0.07 in some token).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace df {
namespace {

constexpr int kDraws = 40000;

// 0.999 quantiles of chi-square with 1..7 degrees of freedom.
double chi2_bound(size_t dof) {
  static const double q[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  return q[dof];
}

// q = [0.4, 0.25, 0.15, 0.1, 0.06, 0.04] as logits.
std::vector<float> logits() {
  std::vector<float> l;
  for (double p : {0.4, 0.25, 0.15, 0.1, 0.06, 0.04}) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::string show(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += std::to_string(x) + " ";
  return s;
}

// Draws kDraws tokens and checks them against `want` (probabilities summing to 1).
void expect_distribution(SamplerOptions o, const std::vector<double>& want) {
  const std::vector<float> l = logits();
  ASSERT_EQ(want.size(), l.size());
  o.seed = 20260101;
  Sampler s(o);
  std::vector<int> count(l.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    const int32_t t = s.sample(l.data(), static_cast<int64_t>(l.size()));
    ASSERT_GE(t, 0);
    ASSERT_LT(t, static_cast<int32_t>(l.size()));
    ++count[static_cast<size_t>(t)];
  }
  double chi2 = 0.0;
  size_t support = 0;
  std::vector<double> freq;
  for (size_t i = 0; i < l.size(); ++i) {
    freq.push_back(static_cast<double>(count[i]) / kDraws);
    if (want[i] == 0.0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " should have been filtered out";
      continue;
    }
    ++support;
    const double e = want[i] * kDraws;
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  EXPECT_LT(chi2, chi2_bound(support - 1)) << "frequencies " << show(freq) << "\nexpected    " << show(want);
}

SamplerOptions plain(float temperature) {
  SamplerOptions o;
  o.temperature = temperature;
  o.top_k = 0;
  o.top_p = 1.0f;
  o.min_p = 0.0f;
  return o;
}

// p_i proportional to q_i^(1/T) over the kept tokens (the first `keep`).
std::vector<double> tempered(double T, size_t keep) {
  const double q[] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
  std::vector<double> p(6, 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::pow(q[i], 1.0 / T);
  for (auto& x : p) x /= sum;
  return p;
}

TEST(SamplerDistribution, NoFilterDrawsTheSoftmax) {
  expect_distribution(plain(1.0f), {0.4, 0.25, 0.15, 0.1, 0.06, 0.04});
}

TEST(SamplerDistribution, TemperatureSharpens) {
  // T = 0.5: q^2 normalised = [0.6531, 0.2551, 0.0918, 0.0408, 0.0147, 0.0065]
  expect_distribution(plain(0.5f), tempered(0.5, 6));
}

TEST(SamplerDistribution, TemperatureFlattens) {
  expect_distribution(plain(2.0f), tempered(2.0, 6));  // sqrt(q) normalised
}

TEST(SamplerDistribution, TopKKeepsTheKMostLikely) {
  SamplerOptions o = plain(1.0f);
  o.top_k = 3;  // [0.4, 0.25, 0.15] / 0.8
  expect_distribution(o, {0.5, 0.3125, 0.1875, 0, 0, 0});
}

TEST(SamplerDistribution, TopPKeepsTheSmallestPrefixReachingP) {
  SamplerOptions o = plain(1.0f);
  o.top_p = 0.7f;  // cumulative 0.4, 0.65, 0.8 >= 0.7: three tokens
  expect_distribution(o, {0.5, 0.3125, 0.1875, 0, 0, 0});
  o.top_p = 0.6f;  // 0.4, 0.65 >= 0.6: two tokens
  expect_distribution(o, {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0});
}

TEST(SamplerDistribution, MinPDropsTokensBelowAFractionOfTheTop) {
  SamplerOptions o = plain(1.0f);
  o.min_p = 0.3f;  // keeps q >= 0.12: [0.4, 0.25, 0.15] / 0.8
  expect_distribution(o, {0.5, 0.3125, 0.1875, 0, 0, 0});
  o.min_p = 0.2f;  // keeps q >= 0.08: four tokens, / 0.9
  expect_distribution(o, {0.4 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0.1 / 0.9, 0, 0});
}

// llama.cpp's order: the filters see the untempered probabilities, the temperature applies to
// what they keep. top-k 5 keeps 5; top-p 0.85 keeps 0.4+0.25+0.15+0.1 = 0.9 (4 tokens); min-p
// 0.3 keeps q >= 0.12 (3 tokens); then T = 2 over those three.
TEST(SamplerDistribution, FiltersThenTemperature) {
  SamplerOptions o = plain(2.0f);
  o.top_k = 5;
  o.top_p = 0.85f;
  o.min_p = 0.3f;
  expect_distribution(o, tempered(2.0, 3));
}

}  // namespace
}  // namespace df
