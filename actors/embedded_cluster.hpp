// Embedded mode: the manager and every stage as actors of one process, tensors
// handed over directly (or through Gloo sockets on 127.0.0.1). The same actors
// and messages as a multi-process cluster.
#pragma once

#include <functional>
#include <vector>

#include <caf/expected.hpp>

#include "actors/net/inspect_endpoint.hpp"
#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/preemption.hpp"
#include "actors/plan/run_record.hpp"
#include "actors/resume_point.hpp"
#include "model/config.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

struct run_options {
  bool collect_parameters = false; // owners' and shadows' state into the result
  bool collect_digests = false;    // their digests (as across processes)
  std::function<void(const step_record&)> on_step;
  // With checkpoints, a loss shadows cannot cover rolls the surviving nodes
  // back to the newest checkpoint: the run goes on from `to_step`.
  std::function<void(std::int64_t to_step, const std::string& why)> on_rollback;
  // A trainer's hooks: each failover once the step it hit has completed (its
  // latency and recomputed work filled in), on the manager's thread; each new
  // plan at a step boundary (a re-partition), on the caller's; each checkpoint
  // once its manifest is on disk (its step and directory), on the writer's.
  std::function<void(const failover_record&)> on_failover;
  std::function<void(std::int64_t step, const std::string& why)> on_replan;
  std::function<void(std::int64_t step, const std::string& dir)> on_checkpoint;
  std::vector<preempt_spec> preemptions; // injected kills
  double preempt_rate = 0;               // plus seeded Poisson kills per 100 steps
  // A killed node's replacement (a new spot instance) is ready this long after
  // the kill (negative: never): a standby node, which the next step boundary
  // takes into the plan where a node runs two stages or the pipeline is
  // shallower than --stages, as with worker processes.
  std::chrono::milliseconds replace_after{-1};
  heartbeat_policy heartbeats;
  transport_kind transport = transport_kind::local; // gloo: real sockets on 127.0.0.1
  // Checkpoints: every `every` steps into `dir` (keeping the newest `keep`, 0
  // for all), and of the last step of every run with a `dir`; `resume` starts
  // from the newest complete one there, on any number of stages.
  checkpoint_options checkpoints;
  // Re-partitioning: when a node runs two stages after a failover, the next
  // step boundary splits the layers anew over the live nodes, a stage each,
  // down to depths.min stages (zeros: cfg.stages, no re-partition). The state
  // moves through files in a scratch directory (DIR/replan with checkpoints).
  depth_range depths;
  // bamboo-inspect may attach (bamboo-train --inspect-port): the observers'
  // endpoint, with pause, resume, checkpoint, redundancy and node commands.
  inspect_options inspect;
  // Polled by the manager: non-zero (a signal's number) stops the run at the
  // next step boundary, checkpointed when there is a checkpoint directory
  // (run_result::stopped_by). May be unset.
  std::function<int()> stop_signal;
};

// Validates cfg, loads the data, partitions the model and trains cfg.steps steps.
// Errors: errc::invalid_config, errc::invalid_data (fix the input),
// errc::unrecoverable_failure (a loss shadows cannot cover), or another failure.
caf::expected<run_result> run_embedded(const train_config& cfg,
                                       const run_options& opts = {});

} // namespace bamboo
