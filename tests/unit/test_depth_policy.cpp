// The adaptive draft depth (src/spec/depth_policy.h) against synthetic machines: a cycle of
// depth d costs c(d) seconds (c(0): a plain step), the draft at position i passes with
// probability a_i (given the ones before it passed). The policy sees only its observations.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "spec/depth_policy.h"

namespace df::spec {
namespace {

struct Machine {
  std::vector<double> cost;    // [max_depth + 1] seconds of a cycle of depth d
  std::vector<double> accept;  // [max_depth] acceptance at position i
  double outlier_rate = 0.0;   // probability that a cycle takes 20x its cost (a lost time slice)
  // Extra seconds of the first speculative cycle after plain steps (a probe): the head catches
  // up on the stretch's last rows (MtpGenerator::kCatchUpRows) instead of a cycle's 1..4 rows.
  double probe_extra = 0.0;
  // Acceptance from token `burst_at` on for `burst_len` tokens (a region of text the head
  // cannot predict), empty: none.
  std::vector<double> burst_accept;
  double burst_at = 0.0, burst_len = 0.0;
};

struct SimRun {
  double tokens = 0, seconds = 0;
  std::vector<int> cycles_at;  // cycles per depth
};

// Generates `tokens` tokens with the policy on the machine; table: the policy's start-up guess.
SimRun generate(const Machine& m, bool fixed, const std::vector<double>& table, int tokens, uint64_t seed = 1) {
  const int D = static_cast<int>(m.accept.size());
  DepthPolicy p(D, fixed, table);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  SimRun r;
  r.cycles_at.assign(static_cast<size_t>(D) + 1, 0);
  int last = 1;  // the previous cycle's depth
  while (r.tokens < tokens) {
    const int d = p.next(D);
    const bool burst = !m.burst_accept.empty() && r.tokens >= m.burst_at && r.tokens < m.burst_at + m.burst_len;
    const std::vector<double>& acc = burst ? m.burst_accept : m.accept;
    int j = 0;
    while (j < d && u(rng) < acc[static_cast<size_t>(j)]) ++j;
    double t = m.cost[static_cast<size_t>(d)];
    if (d > 0 && last == 0) t += m.probe_extra;
    last = d;
    if (u(rng) < m.outlier_rate) t *= 20.0;
    p.observe_cycle(d, t);
    if (d > 0) p.record(d, j);
    ++r.cycles_at[static_cast<size_t>(d)];
    r.tokens += d > 0 ? j + 1 : 1;
    r.seconds += t;
  }
  return r;
}

double rate(const SimRun& r) { return r.tokens / r.seconds; }

// The best fixed policy's rate (plain decoding included) on the machine.
double best_fixed_rate(const Machine& m, int tokens) {
  double best = 1.0 / m.cost[0];
  for (int d = 1; d <= static_cast<int>(m.accept.size()); ++d) {
    Machine md = m;
    md.accept.resize(static_cast<size_t>(d));
    md.cost.resize(static_cast<size_t>(d) + 1);
    md.outlier_rate = 0.0;
    best = std::max(best, rate(generate(md, true, md.cost, tokens)));
  }
  return best;
}

// The default model on the CPU (costs from `bench -t 2`, acceptance on held-out code).
Machine machine(std::vector<double> cost, std::vector<double> accept, double probe_extra = 0.0) {
  Machine m;
  m.cost = std::move(cost);
  m.accept = std::move(accept);
  m.probe_extra = probe_extra;
  return m;
}
Machine cpu_default() { return machine({1.0, 1.75, 2.2, 2.75, 3.3}, {0.96, 0.88, 0.8, 0.5}); }
// The default model on the CPU at one thread, as measured with the row-exact kernels of
// stop 22 (bench -t 1 --draft-max 3: cost tables and cycle medians; acceptance on held-out code).
Machine cpu_measured() { return machine({1.0, 1.85, 2.3, 2.9}, {0.93, 0.92, 0.9}, 0.45); }
// The default model on the H200: the verify costs little more than a step, a head step 0.2 of one.
Machine gpu_default() { return machine({1.0, 1.35, 1.6, 1.85, 2.1}, {0.96, 0.88, 0.85, 0.6}); }

TEST(DepthPolicy, FixedAlwaysDraftsTheLimit) {
  const Machine m = cpu_default();
  DepthPolicy p(4, true, m.cost);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(p.next(4), 4);
    p.record(4, 0);
  }
  EXPECT_EQ(p.next(2), 2);  // the room left (end of generation, context) caps it
  EXPECT_EQ(p.next(0), 0);
}

TEST(DepthPolicy, FailingDraftsFallBackToPlainDecoding) {
  // A random head: nothing is accepted; speculation must cost at most 2 % (probes included).
  Machine m = cpu_default();
  m.accept = {0.0, 0.0, 0.0, 0.0};
  const SimRun r = generate(m, false, m.cost, 256);
  EXPECT_GE(rate(r) * m.cost[0], 0.98);
  EXPECT_GT(r.cycles_at[0], 240);
}

TEST(DepthPolicy, ReachesTheBestFixedDepth) {
  for (const Machine& m : {cpu_default(), gpu_default()}) {
    const double best = best_fixed_rate(m, 4000);
    const SimRun r = generate(m, false, m.cost, 4000);
    EXPECT_GE(rate(r), 0.95 * best) << "cycles per depth " << r.cycles_at[0] << " " << r.cycles_at[1] << " "
                                    << r.cycles_at[2] << " " << r.cycles_at[3] << " " << r.cycles_at[4];
  }
}

TEST(DepthPolicy, AWrongStartTableIsCorrectedByObservations) {
  // The start-up measurement was taken while the machine was busy: it says speculation costs
  // 3x what it does (and a plain step half); the observed cycles decide.
  const Machine m = gpu_default();
  std::vector<double> table = m.cost;
  table[0] *= 0.5;
  for (size_t d = 1; d < table.size(); ++d) table[d] *= 3.0;
  const SimRun r = generate(m, false, table, 4000);
  EXPECT_GE(rate(r), 0.9 * best_fixed_rate(m, 4000));
}

TEST(DepthPolicy, OutliersDoNotMoveTheChoice) {
  // One cycle in 8 takes 20x its time (another process took the core): the medians ignore them.
  for (const Machine& base : {cpu_default(), gpu_default()}) {
    Machine m = base;
    m.outlier_rate = 0.125;
    Machine clean = base;
    const SimRun r = generate(m, false, m.cost, 4000, 7);
    // Compare the tokens per cycle-cost without the outliers: the depths chosen are what counts.
    double cost = 0.0;
    for (size_t d = 0; d < r.cycles_at.size(); ++d) cost += r.cycles_at[d] * clean.cost[d];
    EXPECT_GE(r.tokens / cost, 0.93 * best_fixed_rate(clean, 4000));
  }
}

TEST(DepthPolicy, EstimatesAreMediansOfObservations) {
  DepthPolicy p(2, false, {1.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(p.cycle_seconds(1), 2.0);  // the table until cycles are seen
  for (double t : {9.0, 9.0, 1.5, 1.4, 50.0, 1.6}) p.observe_cycle(1, t);  // the first two: warm-up
  EXPECT_DOUBLE_EQ(p.cycle_seconds(1), 1.55);
  // Depth 2 unseen: its table entry scaled by the speculative cycles' observed / table ratio
  // (median 0.775); depth 0 too while no plain step has been seen.
  EXPECT_NEAR(p.cycle_seconds(2), 3.0 * 0.775, 1e-12);
  EXPECT_NEAR(p.cycle_seconds(0), 1.0 * 0.775, 1e-12);
}

// The measured CPU machine with its probes' longer catch-up: a random head (nothing accepted)
// costs at most 2 % over 256 tokens (the bench's -n), and a real head reaches 95 % of the best
// fixed depth.
TEST(DepthPolicy, MeasuredCpuMachine) {
  Machine m = cpu_measured();
  const double best = best_fixed_rate(m, 4000);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const SimRun r = generate(m, false, m.cost, 4000, seed);
    EXPECT_GE(rate(r), 0.95 * best) << "seed " << seed << " plain " << r.cycles_at[0];
  }
  m.accept = {0.0, 0.0, 0.0};
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const SimRun r = generate(m, false, m.cost, 256, seed);
    EXPECT_GE(rate(r) * m.cost[0], 0.98) << "seed " << seed << " cycles " << r.cycles_at[1] << " " << r.cycles_at[2]
                                         << " " << r.cycles_at[3];
  }
}

// A deeper position that the policy stopped drafting (its few tries failed) must not keep that
// estimate while the text turns predictable: with only position 0 drafted, and passing, its
// estimate rises toward position 0's (the old estimate, updated only when drafted, stayed at
// ~0.2 until an exploration cycle happened to pass there).
TEST(DepthPolicy, AnUndraftedPositionFollowsThePositionBeforeIt) {
  DepthPolicy p(3, false, {1.0, 1.85, 2.3, 2.9});
  for (int i = 0; i < 3; ++i) p.record(2, 1);  // position 1 fails three times
  const double low = p.acceptance(1);
  EXPECT_LT(low, 0.35);
  double prev = low;
  for (int i = 0; i < 60; ++i) {  // depth 1 only: position 0 passes every time
    p.record(1, 1);
    EXPECT_GE(p.acceptance(1), prev - 1e-12) << "cycle " << i;  // never falls while its evidence fades
    EXPECT_LE(p.acceptance(1), p.acceptance(0) + 1e-12);       // never above the position before it
    prev = p.acceptance(1);
  }
  EXPECT_GT(p.acceptance(0), 0.95);
  EXPECT_GT(p.acceptance(1), 0.8);
  // Position 2 (never drafted) follows position 1 likewise.
  EXPECT_LE(p.acceptance(2), p.acceptance(1) + 1e-12);
  EXPECT_GT(p.acceptance(2), 0.6);
}

// A real head meets text it cannot predict (tokens 40..80: nothing accepted, or only the first
// draft): after it, speculation must come back, not stay in plain stretches (256 tokens, as the
// bench; the best fixed depth outside the burst gives the bound).
TEST(DepthPolicy, RecoversAfterABurstOfFailures) {
  for (const std::vector<double>& burst : {std::vector<double>{0.0, 0.0, 0.0}, std::vector<double>{0.9, 0.0, 0.0}}) {
    Machine m = cpu_measured();
    m.burst_accept = burst;
    m.burst_at = 40;
    m.burst_len = 40;
    double sum = 0.0;
    const int n = 16;
    for (uint64_t seed = 1; seed <= n; ++seed) {
      const SimRun r = generate(m, false, m.cost, 1024, seed);
      sum += rate(r) * m.cost[0];
    }
    // outside the burst ~1.28x plain at depth 3; inside it plain (1x): >= 1.15x on average
    EXPECT_GE(sum / n, 1.15) << "burst " << burst[0];
  }
}

}  // namespace
}  // namespace df::spec
