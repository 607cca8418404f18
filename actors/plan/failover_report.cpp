#include "actors/plan/failover_report.hpp"

#include <algorithm>
#include <set>

#include "model/schedule.hpp"

namespace bamboo {

void account_failover(failover_record& f, const schema::step_report& heir,
                      const std::optional<preempt_spec>& kill, const train_config& cfg) {
  f.inherited = static_cast<int>(heir.inherited);
  if (f.at_boundary) { // handed off before the step began: nothing was lost
    f.recomputed_forwards = f.recomputed_backwards = 0;
    return;
  }
  if (!kill || kill->step != f.step) {
    f.recomputed_forwards = static_cast<int>(heir.forwards);
    f.recomputed_backwards = static_cast<int>(heir.backwards);
    return;
  }
  // f.stage names stage s of pipeline p as p*S+s.
  auto ops = make_schedule(f.stage % cfg.stages, cfg.stages, cfg.pipeline_micro_batches(),
                           cfg.redundancy);
  const int upto = std::min<int>(kill->op, static_cast<int>(ops.size()));
  std::set<int> fwd, bwd;
  for (int i = 0; i < upto; ++i) {
    if (ops[i].kind == op_kind::forward)
      fwd.insert(ops[i].micro_batch);
    else if (ops[i].kind == op_kind::backward)
      bwd.insert(ops[i].micro_batch);
  }
  // Forwards the heir inherited from FRC are not recomputed.
  f.recomputed_forwards = std::max(0, static_cast<int>(fwd.size()) - f.inherited);
  f.recomputed_backwards = static_cast<int>(bwd.size());
}

std::string failover_event(const std::vector<failover_record>& failovers) {
  if (failovers.empty())
    return "";
  const bool preempted =
      std::any_of(failovers.begin(), failovers.end(),
                  [](const failover_record& f) { return is_preemption(f.cause); });
  return preempted ? "preempted+failover" : "failover";
}

std::string stage_work(const std::vector<schema::step_report>& reports) {
  std::string work;
  for (const auto& r : reports)
    work += " " + std::to_string(r.forwards + r.inherited) + "/" +
            std::to_string(r.backwards);
  return work;
}

} // namespace bamboo
