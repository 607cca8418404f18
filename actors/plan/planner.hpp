// Plans as plain values and the pure functions that change them; the manager
// and the simulator call these, so they are tested without actors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "schema/codec.hpp"

namespace bamboo {

struct cluster_plan {
  std::uint64_t generation = 1;
  int stages = 0; // per pipeline; owner/shadow are indexed by p * stages + s
  redundancy_mode mode = redundancy_mode::lazy;
  std::vector<int> owner;  // stage -> node running it
  std::vector<int> shadow; // stage -> node holding its replica, -1 for none
  std::vector<bool> alive; // node -> alive

  // Node i runs stage i and holds the replica of stage (i+1) mod S (if any).
  static cluster_plan initial(int stages, redundancy_mode mode);
  // P pipelines of S stages over `nodes` (coordinate p*S+s runs on nodes[p*S+s]);
  // the replica of (p, s) lives on the node of (p, s-1 mod S). Node ids index
  // `alive`, so they should be small integers.
  static cluster_plan assign(const std::vector<int>& nodes, int pipelines, int stages,
                             redundancy_mode mode);
  int pipelines = 1;
  std::vector<int> stages_of(int node) const;
  int live_nodes() const;
};

// The order to place nodes around a pipeline's ring so that each stage and its
// replica (on the node before it, the first stage's on the last node) are in
// different zones where the zones allow it: `zones[i]` is node i's zone; the
// result lists node indices, position s running stage s. The given order is
// kept when it already has no two ring neighbours in one zone (or there is one
// zone); otherwise the nodes of each zone, biggest zone first, fill every other
// position. With more than half the nodes in one zone some neighbours share it.
std::vector<int> zone_ring(const std::vector<std::string>& zones);

// How many ring neighbours (a stage and its replica's node) share a zone.
int same_zone_neighbours(const std::vector<std::string>& zones,
                         const std::vector<int>& ring);

struct failover_decision {
  cluster_plan plan;                         // generation bumped
  std::vector<std::pair<int, int>> promoted; // (stage, node now running it)
  std::string fatal; // non-empty: shadows cannot cover this loss, and why
};

// The loss of `node`: each stage it ran moves to its replica's node. Fatal when
// the node ran two stages, or a stage it ran has no live replica (two
// neighbours lost, or redundancy off).
failover_decision plan_failover(const cluster_plan& plan, int node);

// Shadows to re-create at a step boundary after failovers: each stage without
// a replica gets one on the node running its predecessor stage (p, s-1), unless
// that node runs the stage itself. Returns (stage, node) pairs.
std::vector<std::pair<int, int>> plan_reshadow(const cluster_plan& plan);

// The pipeline depths a plan may choose (beyond Bamboo, which keeps S fixed):
// fewer stages when the live nodes cannot give each stage a node of its own,
// more again when nodes return. 0 means the run's --stages.
struct depth_range {
  int min = 0;
  int max = 0;
};

// The range with its zeros replaced by `stages`.
depth_range resolve(depth_range r, int stages);

// The range's mistakes in the command line's words (--min-stages above
// --max-stages, --stages outside the range, a bound below `lowest` or above
// the model's `layers`), or nullopt.
std::optional<std::string> check_depths(const depth_range& r, int stages, int layers,
                                        int lowest);

// The depth of a new plan on `live` nodes: a stage each, within the range
// (fewer nodes than r.min: r.min, and some node runs two stages).
int plan_depth(int live, const depth_range& r);

// Why the cluster should get a new plan at this step boundary, in words (no
// commas: it goes into the metrics CSV), or empty. Bamboo's triggers for one
// pipeline, given `standby` live nodes outside the plan: a standby node can
// relieve a node that runs two stages, or deepen a pipeline that has fewer
// stages than `depths.max` (after a rollback or a re-partition onto fewer
// nodes). Beyond Bamboo: with no standby node, a node that runs two stages
// while the pipeline is deeper than `depths.min` re-partitions the layers
// over the live nodes, a stage each. `depths` is resolved. Nodes are named by
// `ids` (node -> its name in records) when given.
std::string replan_reason(const cluster_plan& plan, const depth_range& depths,
                          int standby, const std::vector<int>& ids = {});

// How many pipelines of `stages` stages `nodes` nodes hold, sharing
// `micro_batches` equally: the most that fit and divide them (0 when not one fits).
int fit_pipelines(int nodes, int stages, int micro_batches);

// The shape of the next plan on `workers` live ones (the runners of both modes
// share it). A re-plan keeps the pipelines (auto: as many as fit) and takes a
// depth within the range; a rollback, and a re-plan whose members went between
// its decision and its start, takes as many whole pipelines of the run's depth
// as fit (when the run has several), else one pipeline of a stage each (at most
// depths.max). Never more places than workers, for workers >= 1.
struct shape_rules {
  int pipelines = 1; // the run's --pipelines (auto: 1 and auto_pipelines)
  int stages = 1;    // the run's --stages
  int micro_batches = 1;
  depth_range depths; // resolved
  bool auto_pipelines = false;
};
struct plan_shape {
  int pipelines = 1, stages = 1;
};
plan_shape next_plan_shape(const shape_rules& r, int current_pipelines, int workers,
                           bool replan);

// What a plan's end leads to; both runners decide it here, once. A plan that
// ended at a boundary for a new one is re-planned (a stop signal then ends
// the new plan at its first boundary); a loss shadows could not cover rolls
// back to the newest checkpoint when the run writes them and no stop signal
// came; anything else ends the run.
enum class plan_end { finish, replan, roll_back };
struct plan_outcome {
  bool failed = false;        // the plan ended with an error
  bool unrecoverable = false; // that error is a loss shadows could not cover
  bool replanned = false;     // it ended at a step boundary for a new plan
  bool checkpoints = false;   // the run writes checkpoints
  bool stopping = false;      // a stop signal came
};
plan_end after_plan(const plan_outcome& o);

// --pipelines auto, why the cluster should get a new plan at this step
// boundary (words as replan_reason's), or empty: Bamboo's trigger, `standby`
// nodes can form another whole pipeline; or, with none standby, a node runs
// two stages and one pipeline fewer gives every stage a node of its own.
std::string pipeline_reason(const cluster_plan& plan, int standby, int micro_batches,
                            const std::vector<int>& ids = {});

// What a stage has done in the interrupted step, as the manager learns it.
struct stage_done {
  std::set<int> forwards;
  std::set<int> backwards;
  bool restarted = false; // newly promoted: runs its whole schedule again
};

// A stage's state in an interrupted step, as it reports it to the manager.
struct stage_progress {
  int stage = 0;
  std::int64_t step = 0;
  std::vector<int> forwards, backwards, frc;
  bool complete = false;
  schema::step_report report; // valid when complete
};

// What each stage has done of step `step`, from the survivors' progress
// (nullopt for a stage that was restarted): a restarted stage whose update its
// replica already had counts as done; otherwise it starts over with the FRC
// forwards its predecessor ran for it as inherited work. With P pipelines the
// vectors are indexed p*S+s, and `micro_batches` is a pipeline's share.
std::vector<stage_done>
work_done(const std::vector<std::optional<stage_progress>>& progress,
          const std::set<int>& restarted, const std::vector<bool>& committed,
          std::int64_t step, int micro_batches, int pipelines = 1);

struct resume_order_plan {
  std::vector<int> resend_activations;    // to s+1, from kept copies
  std::vector<int> resend_gradients;      // to s-1, from kept copies
  std::vector<int> delivered_activations; // s+1 has them: do not send again
  std::vector<int> delivered_gradients;   // s-1 has them: do not send again
};

// For each stage: what to send again so every stage gets each input exactly
// once (within its pipeline: `done` is indexed p*S+s).
std::vector<resume_order_plan> plan_resume(const std::vector<stage_done>& done,
                                           int pipelines = 1);

// P > 1: how stage s's pipelines get step `step`'s gradient sum after an
// interruption. Those without it (interrupted, or restarted on a replica
// without the update) make it again (source -1) when none has it, or take it
// from the first pipeline that has it (source, which sends it to `targets`).
// Fatal when none has it and a pipeline's only copy of its own gradients went
// with its node after it committed (its replica holds the update, not them).
struct sum_order {
  int source = -1;
  std::vector<int> targets;
  std::string fatal;
};
std::vector<sum_order>
plan_sums(const std::vector<std::optional<stage_progress>>& progress,
          const std::set<int>& restarted, const std::vector<bool>& committed,
          std::int64_t step, int pipelines);

} // namespace bamboo
