// Training across processes, manager side: the gateway admits worker processes
// (cluster token, challenge-response) over CAF's middleman; once `stages` of
// them joined, the same cluster manager as in embedded mode drives the run,
// through proxies that stand for each worker's actors. Tensors move between the
// workers over Gloo, through the rendezvous store this process hosts. When
// shadows cannot cover a loss, the runner rolls the survivors back to the
// newest checkpoint and starts a new manager on them (a stage each), in the
// same processes: the fallback. Workers beyond the plan wait as standby, and a
// re-plan at a step boundary brings them in (the planner's triggers).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "actors/net/network.hpp"
#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/plan/planner.hpp"
#include "actors/plan/preemption.hpp"
#include "actors/plan/run_record.hpp"
#include "actors/resume_point.hpp"
#include "model/config.hpp"
#include "schema/codec.hpp"

namespace bamboo {

struct cluster_options {
  std::string bind = "127.0.0.1"; // never another address unless told
  std::uint16_t port = 0;         // 0: pick one
  std::string token;              // the cluster token workers must prove
  std::string operator_token;     // what bamboo-inspect's commands need (empty: none)
  tls_files tls;                  // with all three: the port speaks only TLS
  std::size_t frame_limit = schema::default_frame_limit;
  heartbeat_policy heartbeats;
  // Kills a launcher will do (node=N@step=K, N the member id): the connection
  // drop they cause is recorded as a preemption, as embedded runs record
  // theirs, instead of as a crash.
  std::vector<preempt_spec> announced_kills;
  std::chrono::milliseconds join_timeout{std::chrono::minutes(2)};
  // Workers to wait for before the first step (0: cfg.stages); those beyond
  // the plan wait as standby, as do workers that join later. At a step
  // boundary where a standby worker can relieve a node that runs two stages
  // (or deepen a pipeline made shallower by a rollback), every stage saves its
  // state (into DIR/replan under the checkpoint directory, else a scratch
  // directory) and a new plan starts from it on the survivors and the standby.
  int workers = 0;
  // The depths a new plan may have (zeros: cfg.stages). With no standby worker,
  // a node running two stages re-partitions the layers over the live workers,
  // down to depths.min stages; standby workers deepen it again, up to depths.max.
  depth_range depths;
  // --pipelines auto: each plan runs as many pipelines of cfg.stages as its
  // workers hold (cfg.pipelines is the first plan's), and a new plan adds one
  // when standby workers can form it, or drops one when a node runs two stages
  // and none is standby. Else every plan runs cfg.pipelines.
  bool auto_pipelines = false;
  bool collect_digests = false; // the workers' final state digests into the result
  // Checkpoints as in embedded mode; every worker writes its stage's file into
  // `dir` (one directory that every process reaches), this process the
  // manifest. With checkpoints, a loss that shadows cannot cover rolls every
  // surviving worker back to the newest complete one, on a new plan.
  checkpoint_options checkpoints;
  // A rollback waits up to this long for new workers to join until the cluster
  // has cfg.stages workers again (the checkpoint-restart baseline's replacement).
  std::chrono::milliseconds replacement_wait{0};
  // Called on the caller's thread: workers may join now; all have joined and
  // the first step begins.
  std::function<void(std::uint16_t port)> on_listening;
  std::function<void()> on_started;
  std::function<void(const step_record&)> on_step;         // on the manager's thread
  std::function<void(const failover_record&)> on_failover; // likewise
  // A checkpoint whose manifest is on disk (its step, its directory), on the
  // writer's thread.
  std::function<void(std::int64_t step, const std::string& dir)> on_checkpoint;
  // The run goes on from the checkpoint of `to_step` (steps from there on are
  // undone), on the caller's thread.
  std::function<void(std::int64_t to_step, const std::string& why)> on_rollback;
  // A new plan starts at `step` (nothing is undone), on the caller's thread.
  std::function<void(std::int64_t step, const std::string& why)> on_replan;
  // Polled: non-zero (a signal's number) stops the run at the next step
  // boundary, checkpointed with a checkpoint directory (run_result::stopped_by).
  std::function<int()> stop_signal;
};

// Errors as run_embedded's, plus errc::transport_failure when the port cannot
// be bound and errc::node_lost when too few workers joined in time.
caf::expected<run_result> run_cluster(const train_config& cfg,
                                      const cluster_options& opts);

} // namespace bamboo
