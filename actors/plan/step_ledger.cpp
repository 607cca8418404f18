#include "actors/plan/step_ledger.hpp"

#include <algorithm>
#include <cmath>

namespace bamboo {

void step_ledger::begin(std::int64_t step, int stages,
                        const std::vector<bool>& has_shadow) {
  step_ = step;
  reported_.assign(stages, false);
  committed_.assign(stages, false);
  synced_.assign(stages, false);
  needs_sync_ = has_shadow;
  reports_.assign(stages, schema::step_report{});
  clip_.reset();
}

bool step_ledger::report(const schema::step_report& r) {
  if (static_cast<std::int64_t>(r.step) != step_ || r.stage >= reported_.size())
    return false;
  const bool was_complete = all_reported();
  reported_[r.stage] = true;
  reports_[r.stage] = r;
  return !was_complete && all_reported();
}

bool step_ledger::all_reported() const {
  return std::all_of(reported_.begin(), reported_.end(), [](bool b) { return b; });
}

double step_ledger::grad_norm() const {
  const std::size_t stages = reports_.size() / static_cast<std::size_t>(pipelines_);
  // One tensor at a time in global layer order: the same additions in the
  // same order whatever the stages' boundaries (a sum of per-stage sums would
  // round differently when a re-partition moves a layer, and so would the clip).
  bool each = true;
  for (std::size_t s = 0; s < stages; ++s)
    each = each && (!reports_[s].tensor_squares.empty() || reports_[s].grad_squares == 0);
  double total = 0;
  for (std::size_t s = 0; s < stages; ++s) {
    if (!each) {
      total += reports_[s].grad_squares; // a peer before 1.10
      continue;
    }
    for (double t : reports_[s].tensor_squares)
      total += t;
  }
  return std::sqrt(total);
}

double step_ledger::loss_sum() const {
  const std::size_t stages = reports_.size() / static_cast<std::size_t>(pipelines_);
  double total = 0; // each pipeline's last stage's, in pipeline order
  for (std::size_t p = 1; stages > 0 && p <= static_cast<std::size_t>(pipelines_); ++p)
    total += reports_[p * stages - 1].loss_sum;
  return total;
}

void step_ledger::owner_lost(int stage) {
  committed_[stage] = synced_[stage];
  needs_sync_[stage] = false;
  if (!clip_) // the heir reports again; before the clip is set, wait for it
    reported_[stage] = false;
}

bool step_ledger::complete() const {
  for (std::size_t s = 0; s < committed_.size(); ++s)
    if (!committed_[s] || (needs_sync_[s] && !synced_[s]))
      return false;
  return true;
}

} // namespace bamboo
