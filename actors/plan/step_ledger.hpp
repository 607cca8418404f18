// The manager's bookkeeping of one step: who reported, the clip factor once all
// did, who committed, which shadows synced. Plain code, tested without actors.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "schema/codec.hpp"

namespace bamboo {

class step_ledger {
public:
  // `stages` counts the stages of every pipeline (P * S, named p*S+s).
  void begin(std::int64_t step, int stages, const std::vector<bool>& has_shadow);
  // P data-parallel pipelines: the loss is summed over each pipeline's last
  // stage, and the gradient norm taken from pipeline 0's (all hold the sum).
  void set_pipelines(int pipelines) { pipelines_ = pipelines; }
  std::int64_t step() const { return step_; }

  // Returns true when this report completed the set (the clip factor can be set).
  bool report(const schema::step_report& r);
  bool all_reported() const;
  // Squared norms summed in stage order, not arrival order: the clip must not vary.
  double grad_norm() const;
  double loss_sum() const;

  void set_clip(double coef) { clip_ = coef; }
  std::optional<double> clip() const { return clip_; }

  void commit(int stage) { committed_[stage] = true; }
  bool committed(int stage) const { return committed_[stage]; }
  void synced(int stage) { synced_[stage] = true; }
  bool is_synced(int stage) const { return synced_[stage]; }
  bool reported(int stage) const { return reported_[stage]; }

  // A stage's owner was lost: its update counts as done only if its shadow got it.
  void owner_lost(int stage);
  // A stage no longer has a shadow to wait for.
  void shadow_lost(int stage) { needs_sync_[stage] = false; }
  // A shadow added during the step: its owner's update must reach it too.
  void expect_sync(int stage) { needs_sync_[stage] = true; }

  bool complete() const;
  const std::vector<schema::step_report>& reports() const { return reports_; }

private:
  std::int64_t step_ = -1;
  std::vector<bool> reported_, committed_, synced_, needs_sync_;
  std::vector<schema::step_report> reports_;
  std::optional<double> clip_;
  int pipelines_ = 1;
};

} // namespace bamboo
