// Adaptive draft depth: a running estimate of how often the draft at each position is
// accepted, and of what a cycle of each depth costs on the running machine. Before each cycle
// it picks the depth with the most expected tokens per second; depth 0 (plain decoding) runs
// for a stretch of tokens, then a probe at the best speculative depth refreshes the estimate.
// Stretches grow (x4) while probes gain nothing (one that gains some drafts keeps the length:
// a real head's deep probe often misses its last draft); a probe whose drafts all pass restarts them and
// starts a trial: up to kTrial cycles at the best depth whatever the
// estimate says (it ends at a cycle that gains nothing), so that a head that predicts again
// (after text it could not) is seen within a few cycles, not one probe per stretch.
//
// Expected tokens of a cycle of depth N (a_i: acceptance at draft position i, given that the
// drafts before it were accepted):  E(N) = 1 + sum_{i=1..N} prod_{k<=i} a_k
// a_i: the decayed passes / tries at position i (kDecay per speculative cycle, tried or not),
// plus a prior of the weight of one draft: 0.8 at position 0, a_{i-1} deeper. A position that
// has not been drafted for a while (the policy chose shallower cycles) so follows the one
// before it, that is the text's current predictability, instead of keeping the estimate of the
// few failures that made the policy stop drafting it.
// Its time T(N): the median of the last kWindow observed cycles of depth N (robust to the
// outliers of a loaded machine or a graph recording); until kMinObs have been seen, the
// start-up table's guess times the median ratio observed / table of the recent speculative
// cycles (plain steps for depth 0), so that a machine slower or faster than at start, or a
// table measured before the device graphs were recorded, moves every guess alike.
// A probe (the first speculative cycle after plain steps) costs more than a cycle in a run of
// cycles (the head catches up on the stretch's last rows): its time never enters T(N)'s
// median (only the table's scale), so that the probes of plain stretches do not make
// speculation look dearer than it is (which kept a real head in plain stretches).
// Every kExplore speculative cycles one cycle runs a neighbouring depth (best + 1, best - 1 by
// turns), so that the acceptance at the next position and the neighbours' costs stay current.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace df::spec {

class DepthPolicy {
 public:
  // table[d]: first-guess seconds of a cycle of depth d = 0..max_depth (0: a plain step),
  // measured at start.
  DepthPolicy(int max_depth, bool fixed, std::vector<double> table);
  // The depth for the next cycle (0: a plain step), at most `limit`.
  int next(int limit);
  // After a cycle of depth `depth` that accepted `accepted` drafts (0..depth).
  void record(int depth, int accepted);
  // A whole cycle of depth `depth` (0: a plain step) as it ran: head, verify, accept.
  void observe_cycle(int depth, double seconds);
  double acceptance(int i) const;        // estimate at draft position i (0-based)
  double cycle_seconds(int depth) const;  // the current estimate of T(depth)
  static constexpr int kPlainStretch = 16;      // plain steps before a probe, at first
  static constexpr int kStretchGrowth = 4;      // its growth after each probe that fails
  static constexpr int kMaxPlainStretch = 256;
  static constexpr int kTrial = 4;              // cycles after a probe that passed
  static constexpr int kWindow = 9;             // observations per depth (median)
  static constexpr int kMinObs = 3;             // observations before the median replaces the guess
  static constexpr int kExplore = 12;           // speculative cycles between neighbour probes

 private:
  struct Ring {  // the last kWindow values
    std::array<double, kWindow> v{};
    int n = 0, next = 0;
    void push(double x);
    double median() const;
  };
  double expected_tokens(int depth) const;  // E(N)
  double expected_rate(int depth) const;    // E(N) / T(N)
  int best_speculative(int limit) const;    // argmax over 1..limit of E/T
  int choose(int limit);                    // next() without its bookkeeping
  int max_depth_;
  bool fixed_;
  std::vector<double> table_;
  std::vector<double> hits_, tries_;  // decayed counts per draft position
  std::vector<Ring> obs_;             // [max_depth + 1] observed cycle seconds
  std::vector<int> seen_;             // [max_depth + 1] cycles observed per depth
  Ring ratio_spec_, ratio_plain_;     // observed / table of the recent cycles (depth >= 1; 0)
  // Observations skipped per depth: a shape's first forward runs eagerly and its second
  // records the device graph (StepGraphs), both far slower than the replays that follow.
  static constexpr int kWarmCycles = 2;
  int plain_left_ = 0;                // plain steps left in the current stretch
  int stretch_ = kPlainStretch;       // length of the next stretch
  bool probing_ = false;              // the last depth was a stretch's closing probe
  bool probe_ok_ = false;             // ... and every draft of it was accepted
  bool probe_gain_ = false;           // ... and at least one draft of it was accepted
  int since_explore_ = 0;             // speculative cycles since the last neighbour probe
  int last_ = -1;                     // the depth next() returned last
  bool after_plain_ = false;          // ... and it came after a plain step (a probe)
  int trial_left_ = 0;                // trial cycles left (after a probe that passed)
  bool explore_up_ = true;            // the next neighbour probe: best + 1 (else best - 1)
};

}  // namespace df::spec
