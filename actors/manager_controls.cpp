// An operator's hold on the run (bamboo-inspect, through run_controls): the
// pause at a step boundary, what the manager says of itself on the actor
// board, the node orders of an embedded run, and a redundancy change.
#include <set>

#include "actors/manager_state.hpp"
#include "actors/plan/preemption.hpp"
#include "log/log.hpp"

namespace bamboo {

// An operator's pause holds the step at its boundary (a checkpoint asked for
// meanwhile is taken there); true while it does.
bool manager_state::held() {
  if (!spec_.controls)
    return false;
  if (!spec_.controls->paused()) {
    if (paused_)
      logger_->info("resumed before step {} by an operator", step_);
    paused_ = false;
    return false;
  }
  if (!paused_)
    logger_->info("paused before step {} by an operator: no step starts until resume",
                  step_);
  paused_ = true;
  maybe_checkpoint(false);
  say("paused", "before step " + std::to_string(step_));
  return true;
}

void manager_state::say(const char* state, const std::string& doing) {
  if (row_)
    row_.set(state, doing, self_->mailbox().size());
  if (spec_.controls) { // the nodes an operator's order may name (embedded)
    std::vector<int> alive;
    for (int n = 0; n < static_cast<int>(plan_.alive.size()); ++n)
      if (plan_.alive[n])
        alive.push_back(id(n));
    spec_.controls->set_live(std::move(alive));
  }
}

// An operator's orders for nodes of this process (embedded mode): a kill now
// (the node's actors die, or before their next instruction if computing), or
// a notice or drain (its stages move at the next step boundary).
void manager_state::carry_out_orders() {
  if (!spec_.controls)
    return;
  for (const auto& o : spec_.controls->take_orders()) {
    int n = -1;
    for (int i = 0; i < static_cast<int>(plan_.alive.size()); ++i)
      if (plan_.alive[i] && id(i) == o.node)
        n = i;
    if (n < 0) {
      logger_->warn("an operator's order for node {} is void: it is not in the plan",
                    o.node);
      continue;
    }
    if (o.action == run_controls::node_action::preempt) {
      logger_->warn("node {} preempted by an operator's command", o.node);
      if (spec_.injector)
        spec_.injector->kill_now(n, step_);
      if (nodes_[n].group)
        nodes_[n].group->kill_all({});
      continue;
    }
    logger_->info("node {} {} by an operator's command: its stages move to their "
                  "shadows at the next step boundary",
                  o.node,
                  o.action == run_controls::node_action::drain
                      ? "drains"
                      : "has a preemption notice");
    notices_.insert(n);
  }
}

// An operator's redundancy change: a new plan from the boundary's state, once
// every stage runs on a node of its own (else it waits, said once).
std::string manager_state::redundancy_change() {
  if (!spec_.controls)
    return {};
  const auto wanted = spec_.controls->wanted_redundancy();
  if (wanted == spec_.cfg.redundancy)
    return {};
  std::set<int> owners;
  for (int s = 0; s < coordinates(); ++s)
    if (!owners.insert(plan_.owner[s]).second) {
      if (!redundancy_waits_)
        logger_->warn("redundancy {} waits: node {} runs two stages (a new plan needs "
                      "a node per stage)",
                      to_string(wanted), id(plan_.owner[s]));
      redundancy_waits_ = true;
      return {};
    }
  return std::string("an operator set redundancy to ") + to_string(wanted);
}

} // namespace bamboo
