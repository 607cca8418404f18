// The cluster manager: drives the steps of a run (run, report, commit), owns the
// plan and its generation, supervises the nodes' actors and fails a lost node's
// stage over to its shadow in the middle of a step. Where the nodes live (this
// process or worker processes) is its node_backend's business.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/node_backend.hpp"
#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/run_record.hpp"
#include "model/config.hpp"
#include "model/partition.hpp"

namespace bamboo {

class preemption_injector;
class checkpoint_writer;
class run_controls;
class actor_board;

struct manager_spec {
  train_config cfg;
  std::vector<stage_range> parts;
  std::shared_ptr<node_backend> nodes;
  std::shared_ptr<preemption_injector> injector; // may be null; gives kill times
  heartbeat_policy heartbeats;
  bool collect_parameters = false; // owners' and shadows' state into the result
  bool collect_digests = false;    // their digests (works across processes too)
  std::function<void(const step_record&)> on_step; // called on the manager's thread
  std::function<void(const failover_record&)> on_failover; // likewise, per failover
  std::shared_ptr<run_result> result;
  std::int64_t first_step = 0; // a resumed run starts at its checkpoint's step
  // A run rolled back on the same nodes goes on with newer generations, so
  // that nothing of the old ones is mistaken for theirs.
  std::uint64_t first_generation = 1;
  // When shadows cannot cover a loss, keep the surviving nodes (they wait for
  // a new assignment) for a rollback to a checkpoint, instead of ending them.
  bool keep_nodes_on_failure = false;
  std::string first_event; // the first step's event column (after a rollback)
  // Every `checkpoint_every` steps the owners' state goes to this writer (null: none).
  std::shared_ptr<checkpoint_writer> checkpoints;
  int checkpoint_every = 0;
  // Re-plans: `standby` live members are outside the plan
  // (updated with (standby_atom, count)); when the planner's replan_reason
  // fires at a step boundary, every owner writes its state into `replans` and
  // the plan ends there (the result's replanned_at), for a new plan that
  // starts from those files. Null: no re-plans.
  std::shared_ptr<checkpoint_writer> replans;
  int standby = 0;
  depth_range depths; // the depths the run allows (zeros: cfg.stages)
  // --pipelines auto: a new plan adds a pipeline when standby members can
  // form one, or drops one when a node runs two stages and none is standby.
  bool auto_pipelines = false;
  // An operator's commands (bamboo-inspect): pause and resume, a checkpoint
  // now, a redundancy change (a re-plan, with `replans`), and in embedded mode
  // a node's preemption, notice or drain. Null: none.
  std::shared_ptr<run_controls> controls;
  // Where the manager says what it is doing, for bamboo-inspect. Null: nowhere.
  std::shared_ptr<actor_board> actors;
  // Non-zero (a signal's number, SIGTERM say): the run stops at the next step
  // boundary, with a checkpoint of it when checkpoints are written; a step
  // that does not finish within stop_deadline is abandoned. Polled; may be unset.
  std::function<int()> stop_signal;
};

// How long a stop waits for the step in flight.
inline constexpr std::chrono::seconds stop_deadline{10};

// (train_atom) -> (done_atom) once all steps committed (or a stop signal ended
// the run early: run_result::stopped_by), or an error
// (errc::unrecoverable_failure when shadows cannot cover a loss; the result's
// `alive` then says which nodes survived).
// (done_atom) also when the plan ended at a step boundary for a new one
// (run_result::replanned_at), with the nodes kept for it.
// (standby_atom, count): the live members outside the plan.
// (notice_atom, node, deadline_ms): a preemption notice for the node; its
// stages move to their shadows at the next step boundary (deadline_ms < 0: an
// operator drains the node).
caf::actor spawn_manager(caf::actor_system& sys, manager_spec spec);

} // namespace bamboo
