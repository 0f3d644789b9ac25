#include "spec/depth_policy.h"

#include <algorithm>

#include "common/error.h"

namespace df::spec {
namespace {

constexpr double kDecay = 0.95;      // weight of the past per observation
constexpr double kPriorHits = 1.6;   // prior: 0.8 acceptance with the weight of 2 drafts
constexpr double kPriorTries = 2.0;
constexpr double kCostKeep = 0.8;    // weight of the cost table per new timing

}  // namespace

DepthPolicy::DepthPolicy(int max_depth, bool fixed, std::vector<double> verify, double head)
    : max_depth_(max_depth), fixed_(fixed), verify_(std::move(verify)), head_(head),
      hits_(static_cast<size_t>(max_depth), kPriorHits), tries_(static_cast<size_t>(max_depth), kPriorTries),
      cycle_(static_cast<size_t>(max_depth) + 1, 0.0), seen_(static_cast<size_t>(max_depth) + 1, 0) {
  if (max_depth < 1) throw Error("draft depth must be at least 1");
  if (static_cast<int>(verify_.size()) < max_depth + 1) throw Error("cost table shorter than the deepest draft + 1");
}

void DepthPolicy::observe_cycle(int depth, double seconds) {
  if (depth < 0 || depth > max_depth_) return;
  // The first cycles of a depth run eagerly and record its graphs (CUDA): not its cost.
  if (seen_[static_cast<size_t>(depth)]++ < kWarmCycles) return;
  double& c = cycle_[static_cast<size_t>(depth)];
  c = c > 0.0 ? kCostKeep * c + (1.0 - kCostKeep) * seconds : seconds;
}

double DepthPolicy::acceptance(int i) const { return hits_[static_cast<size_t>(i)] / tries_[static_cast<size_t>(i)]; }

double DepthPolicy::expected_rate(int depth) const {
  double e = 1.0, run = 1.0;
  for (int i = 0; i < depth; ++i) {
    run *= acceptance(i);
    e += run;
  }
  const double measured = cycle_[static_cast<size_t>(depth)];
  const double t = measured > 0.0 ? measured : verify_[static_cast<size_t>(depth)] + depth * head_;
  return e / std::max(t, 1e-12);
}

int DepthPolicy::next(int limit) {
  limit = std::min(limit, max_depth_);
  if (limit <= 0) return 0;
  if (fixed_) return limit;
  if (plain_left_ > 0) {
    --plain_left_;
    probing_ = plain_left_ == 0;
    return probing_ ? 1 : 0;  // the stretch ends with a probe
  }
  const bool after_probe = probing_;
  probing_ = false;
  int best = 0;
  double best_rate = expected_rate(0);
  for (int d = 1; d <= limit; ++d) {
    const double r = expected_rate(d);
    if (r > best_rate) {
      best = d;
      best_rate = r;
    }
  }
  if (best == 0) {
    stretch_ = after_probe ? std::min(2 * stretch_, kMaxPlainStretch) : kPlainStretch;
    plain_left_ = stretch_;
    return next(limit);
  }
  stretch_ = kPlainStretch;
  return best;
}

void DepthPolicy::record(int depth, int accepted) {
  // Position i was tried when every draft before it was accepted.
  for (int i = 0; i < depth && i <= accepted; ++i) {
    auto k = static_cast<size_t>(i);
    hits_[k] = hits_[k] * kDecay + (i < accepted ? 1.0 : 0.0);
    tries_[k] = tries_[k] * kDecay + 1.0;
  }
}

}  // namespace df::spec
