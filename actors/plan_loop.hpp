// The recovery driver both modes share: one manager per plan, and when a plan
// ends for a new one (a re-plan at a step boundary) or on a loss shadows could
// not cover (a rollback to the newest checkpoint), the next plan's shape, its
// members and the step it starts from are decided here, once. A mode (nodes as
// actors of this process, or worker processes) supplies only its members:
// who is live, the nodes of a plan on them, the wait for a plan's end and for
// replacements.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/run_record.hpp"
#include "model/config.hpp"

namespace bamboo {

struct checkpoint;
class checkpoint_writer;
class token_corpus;
class node_backend;
class inspect_board;
class run_controls;
class actor_board;
struct manager_spec;

// Where a plan starts: a step and the step directory holding its state (empty:
// step 0, from the seed), with that state when it is loaded in this process.
struct plan_start {
  std::int64_t step = 0;
  std::string dir;
  std::shared_ptr<const checkpoint> state;
};

// A mode's members. Every call may find members gone or come since the last:
// a plan is shaped on those live when it starts, never on those counted before.
class member_pool {
public:
  virtual ~member_pool() = default;
  // Live members now: the plan's (until keep() drops its lost ones) and the standby.
  virtual int live() const = 0;
  // The fewest members a plan runs on.
  virtual int minimum() const = 0;
  // The state a plan starts from, loaded where this mode needs it here.
  virtual caf::expected<plan_start> open(const train_config& cfg, plan_start from) = 0;
  // The nodes of the plan spec.cfg shapes, on the first places of the live
  // members (the others are standby), at `generation`; sets the mode's own
  // fields of spec (its injector).
  virtual caf::expected<std::shared_ptr<node_backend>>
  nodes(manager_spec& spec, const plan_start& from, std::uint64_t generation) = 0;
  // Trains until the manager ends the plan, telling it of standby changes:
  // none when done, else its error.
  virtual caf::error await_plan(const caf::actor& manager, int places) = 0;
  // The plan ended: the survivors (its node numbers) stay first, then the
  // standby; returns how many of the plan's nodes stayed.
  virtual int keep(const std::vector<int>& alive) = 0;
  // Waits, up to the mode's replacement time, until `count` members are live.
  virtual void top_up(int count) = 0;
  // The members' word in messages ("nodes", "workers").
  virtual const char* noun() const = 0;
};

struct plan_loop_spec {
  train_config cfg;
  std::shared_ptr<const token_corpus> corpus;
  shape_rules rules;
  plan_start first;
  std::string checkpoint_dir;
  std::shared_ptr<checkpoint_writer> checkpoints; // null: none
  int checkpoint_every = 0;
  std::shared_ptr<checkpoint_writer> replans; // null: no re-plans
  heartbeat_policy heartbeats;
  bool collect_parameters = false, collect_digests = false;
  std::function<void(const step_record&)> on_step;
  std::function<void(const failover_record&)> on_failover;
  std::function<void(std::int64_t step, const std::string&why)> on_replan, on_rollback;
  std::function<int()> stop_signal;
  std::shared_ptr<inspect_board> board; // null: no observers
  std::shared_ptr<run_controls> controls;
  std::shared_ptr<actor_board> actors;
};

// The fields both modes' options share (run_options, cluster_options).
template <class Options>
void take_options(plan_loop_spec& s, const Options& o) {
  s.heartbeats = o.heartbeats;
  s.collect_digests = o.collect_digests;
  s.on_step = o.on_step;
  s.on_failover = o.on_failover;
  s.on_replan = o.on_replan;
  s.on_rollback = o.on_rollback;
  s.stop_signal = o.stop_signal;
}

// Trains cfg.steps steps over as many plans as the run needs. Errors as the
// manager's (errc::unrecoverable_failure when nothing can mend a loss).
caf::expected<run_result> run_plans(caf::actor_system& sys, const plan_loop_spec& spec,
                                    member_pool& members);

} // namespace bamboo
