#include "spec/depth_policy.h"

#include <algorithm>

#include "common/error.h"

namespace df::spec {
namespace {

constexpr double kDecay = 0.95;      // weight of the past per speculative cycle
constexpr double kPriorHits = 0.8;   // prior: 0.8 acceptance with the weight of 1 draft (optimistic:
constexpr double kPriorTries = 1.0;  // one failed cycle is enough to bring it to 0.4)

}  // namespace

void DepthPolicy::Ring::push(double x) {
  v[static_cast<size_t>(next)] = x;
  next = (next + 1) % kWindow;
  n = std::min(n + 1, kWindow);
}

double DepthPolicy::Ring::median() const {
  std::array<double, kWindow> s = v;
  std::sort(s.begin(), s.begin() + n);
  return n % 2 ? s[static_cast<size_t>(n / 2)] : 0.5 * (s[static_cast<size_t>(n / 2 - 1)] + s[static_cast<size_t>(n / 2)]);
}

DepthPolicy::DepthPolicy(int max_depth, bool fixed, std::vector<double> table)
    : max_depth_(max_depth), fixed_(fixed), table_(std::move(table)),
      hits_(static_cast<size_t>(std::max(max_depth, 0)), 0.0),
      tries_(static_cast<size_t>(std::max(max_depth, 0)), 0.0),
      obs_(static_cast<size_t>(std::max(max_depth, 0)) + 1), seen_(static_cast<size_t>(std::max(max_depth, 0)) + 1, 0) {
  if (max_depth < 1) throw Error("draft depth must be at least 1");
  if (static_cast<int>(table_.size()) < max_depth + 1) throw Error("cost table shorter than the deepest draft + 1");
  for (int d = 0; d <= max_depth; ++d)
    if (!(table_[static_cast<size_t>(d)] > 0.0)) throw Error("cost table entries must be positive");
}

void DepthPolicy::observe_cycle(int depth, double seconds) {
  if (depth < 0 || depth > max_depth_ || !(seconds > 0.0)) return;
  const auto d = static_cast<size_t>(depth);
  // The first cycles of a depth run eagerly and record its graphs (CUDA): not its cost.
  if (seen_[d]++ < kWarmCycles) return;
  if (depth > 0 && depth == last_ && after_plain_) {
    // A probe: its time only scales the table (a wrong start-up table is corrected by probes
    // too), never a depth's own median.
    ratio_spec_.push(seconds / table_[d]);
    return;
  }
  obs_[d].push(seconds);
  (depth == 0 ? ratio_plain_ : ratio_spec_).push(seconds / table_[d]);
}

double DepthPolicy::acceptance(int i) const {
  const auto k = static_cast<size_t>(i);
  // The prior: position 0's is kPriorHits; a deeper one's is the position before it (a draft
  // deep in a predictable stretch passes about as often as the one before it), so that a
  // position not drafted for a while follows the text's current predictability.
  const double prior = i == 0 ? kPriorHits / kPriorTries : acceptance(i - 1);
  return (hits_[k] + kPriorTries * prior) / (tries_[k] + kPriorTries);
}

double DepthPolicy::cycle_seconds(int depth) const {
  const auto d = static_cast<size_t>(depth);
  if (obs_[d].n >= kMinObs) return obs_[d].median();
  // The table scaled as the observed cycles of its kind (speculative or plain), else the other.
  const Ring& own = depth == 0 ? ratio_plain_ : ratio_spec_;
  const Ring& other = depth == 0 ? ratio_spec_ : ratio_plain_;
  return table_[d] * (own.n > 0 ? own.median() : other.n > 0 ? other.median() : 1.0);
}

double DepthPolicy::expected_tokens(int depth) const {
  double e = 1.0, run = 1.0;
  for (int i = 0; i < depth; ++i) {
    run *= acceptance(i);
    e += run;
  }
  return e;
}

double DepthPolicy::expected_rate(int depth) const {
  return expected_tokens(depth) / std::max(cycle_seconds(depth), 1e-12);
}

int DepthPolicy::best_speculative(int limit) const {
  int best = 1;
  double best_rate = expected_rate(1);
  for (int d = 2; d <= limit; ++d) {
    const double r = expected_rate(d);
    if (r > best_rate) {
      best = d;
      best_rate = r;
    }
  }
  return best;
}

int DepthPolicy::next(int limit) {
  const int d = choose(limit);
  after_plain_ = last_ == 0 && d > 0;
  last_ = d;
  return d;
}

int DepthPolicy::choose(int limit) {
  limit = std::min(limit, max_depth_);
  if (limit <= 0) return 0;
  if (fixed_) return limit;
  if (plain_left_ > 0) {
    if (--plain_left_ > 0) return 0;
    probing_ = true;  // the stretch ends with a probe at the most promising depth
    return best_speculative(limit);
  }
  const bool after_probe = probing_;
  probing_ = false;
  if (after_probe && probe_ok_) trial_left_ = kTrial;
  const int spec = best_speculative(limit);
  if (trial_left_ > 0) {  // after a probe that passed: a few cycles, whatever the estimate says
    --trial_left_;
    stretch_ = kPlainStretch;
    return spec;
  }
  if (expected_rate(spec) <= expected_rate(0)) {
    // Stretches grow while probes fail; a probe whose drafts were all accepted restarts them.
    // Stretches grow while probes gain nothing; a probe that gained some drafts keeps the
    // length; one whose drafts all passed (or none: speculation stopped paying) restarts them.
    if (!after_probe || probe_ok_)
      stretch_ = kPlainStretch;
    else if (!probe_gain_)
      stretch_ = std::min(kStretchGrowth * stretch_, kMaxPlainStretch);
    plain_left_ = stretch_;
    return choose(limit);
  }
  stretch_ = kPlainStretch;
  if (++since_explore_ >= kExplore && limit > 1) {
    since_explore_ = 0;
    const int up = spec + 1, down = spec - 1;
    const bool go_up = explore_up_ ? up <= limit : down < 1;
    explore_up_ = !explore_up_;
    return go_up ? std::min(up, limit) : std::max(down, 1);
  }
  return spec;
}

void DepthPolicy::record(int depth, int accepted) {
  probe_ok_ = probing_ && accepted == depth;
  probe_gain_ = probing_ && accepted > 0;
  if (accepted == 0) trial_left_ = 0;  // a trial ends at its first cycle that gains nothing
  // Every position's counts age by one cycle (an untried position's evidence fades toward its
  // prior); position i was tried when every draft before it was accepted.
  for (int i = 0; i < max_depth_; ++i) {
    auto k = static_cast<size_t>(i);
    hits_[k] *= kDecay;
    tries_[k] *= kDecay;
    if (i < depth && i <= accepted) {
      hits_[k] += i < accepted ? 1.0 : 0.0;
      tries_[k] += 1.0;
    }
  }
}

}  // namespace df::spec
