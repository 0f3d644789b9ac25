// Adaptive draft depth: a running estimate of how often the draft at each position is
// accepted, and a cost table (seconds of a trunk forward of k rows, of one head row) measured
// on the running machine. Before each cycle it picks the depth with the most expected tokens
// per second; depth 0 (plain decoding) runs for a stretch of tokens, then a depth-1 probe
// refreshes the estimate; stretches double while probes keep choosing plain decoding.
//
// Expected tokens of a cycle of depth N (a_i: acceptance at draft position i, given that the
// drafts before it were accepted):  E(N) = 1 + sum_{i=1..N} prod_{k<=i} a_k
// Its time:                          T(N) = verify(N + 1) + N * head, until cycles of depth N
//                                    have run: then their measured time (a running average)
// Plain decoding:                    E(0) / T(0) = 1 / verify(1)
#pragma once
#include <cstdint>
#include <vector>

namespace df::spec {

class DepthPolicy {
 public:
  // verify[k-1]: seconds of a trunk forward of k rows, k = 1..max_depth+1; head: one head row.
  DepthPolicy(int max_depth, bool fixed, std::vector<double> verify, double head);
  // The depth for the next cycle (0: a plain step), at most `limit`.
  int next(int limit);
  // After a cycle of depth `depth` that accepted `accepted` drafts (0..depth).
  void record(int depth, int accepted);
  // A measured time of this run: a trunk forward of `rows` rows (with its argmax) or of one
  // head row; the cost table follows them (the start-up table is a first guess).
  // A whole cycle of depth `depth` (0: a plain step) as it ran: head, verify, accept.
  // Once a depth has been observed, its measured cycle time replaces the table's estimate.
  void observe_cycle(int depth, double seconds);
  double acceptance(int i) const;  // estimate at draft position i (0-based)
  static constexpr int kPlainStretch = 16;     // plain steps before a probe, at first
  static constexpr int kMaxPlainStretch = 256;  // doubled after each probe that fails

 private:
  double expected_rate(int depth) const;  // E(N) / T(N)
  int max_depth_;
  bool fixed_;
  std::vector<double> verify_;
  double head_;
  std::vector<double> hits_, tries_;  // decayed counts per draft position
  std::vector<double> cycle_;         // [max_depth + 1] measured cycle seconds (0: none yet)
  std::vector<int> seen_;             // [max_depth + 1] cycles observed per depth
  // Observations skipped per depth: a shape's first forward runs eagerly and its second
  // records the device graph (StepGraphs), both far slower than the replays that follow.
  static constexpr int kWarmCycles = 2;
  int plain_left_ = 0;                // plain steps left in the current stretch
  int stretch_ = kPlainStretch;       // length of the next stretch
  bool probing_ = false;              // the last depth was a stretch's closing probe
};

}  // namespace df::spec
