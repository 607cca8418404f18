// What a completed failover step reports: the work redone for a lost stage, the
// step's event, each stage's work. Plain code, called by the manager and tested
// without actors.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/plan/preemption.hpp"
#include "actors/plan/run_record.hpp"
#include "model/config.hpp"

namespace bamboo {

// Fills f.inherited and f.recomputed_*: from the injected kill point when known
// (`kill`: the spec of the kill that fired, if it fired in f.step), else the heir's work
// as an upper bound; zero for a hand-off at a step boundary. `heir` is the lost stage's
// report of the step.
void account_failover(failover_record& f, const schema::step_report& heir,
                      const std::optional<preempt_spec>& kill, const train_config& cfg);

// "preempted+failover" when a node of the step's failovers was preempted (killed
// or noticed), else "failover"; "" for none.
std::string failover_event(const std::vector<failover_record>& failovers);

// " 4/4 4/4 ...": forwards (own and inherited) / backwards, by stage.
std::string stage_work(const std::vector<schema::step_report>& reports);

} // namespace bamboo
