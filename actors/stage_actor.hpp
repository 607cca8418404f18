// The actor of one pipeline stage, in one of two modes (one behavior each):
//   active: runs the stage's instructions each step, commits, syncs its shadow;
//   shadow: holds the replica of a successor stage, applies the owner's
//           gradients, and becomes active when promoted.
// Spawned detached: LibTorch compute runs on a thread of its own and never holds
// up CAF's scheduler (or a heartbeat).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "model/config.hpp"

namespace bamboo {

class stage_executor;
class tensor_transport;
class transport_registry;
class preemption_injector;

// The actors of one node: when the node is preempted they all die at once.
struct node_group {
  std::mutex mtx;
  std::vector<caf::actor> members;
  void add(caf::actor a);
  void kill_all(const caf::actor_addr& except);
};

struct stage_actor_spec {
  train_config cfg;
  int node = 0;
  std::shared_ptr<stage_executor> executor;
  std::shared_ptr<stage_executor> replica;        // active: the node's shadow, for FRC
  std::shared_ptr<transport_registry> transports; // each generation's groups
  std::shared_ptr<preemption_injector> injector;
  std::shared_ptr<node_group> group;
  // Shadow sync through the tensor transport (across processes) instead of an
  // in-process hand-off: the owner of stage s sends its clipped gradients to
  // rank s-1 (the node holding its replica), which receives them on commit.
  bool sync_through_transport = false;
};

using shadow_atom = caf::atom_constant<caf::atom("shadow")>;

// Protocol (all tagged with the generation; see messages.hpp):
//  active: (run_step_atom, gen, k) -> supervisor gets schema::step_report;
//          (progress_atom, gen) -> stage_progress_msg; resume_order;
//          schema::commit -> (committed_atom, gen, k, stage) and a shadow_update
//          to the actor set by (shadow_atom, actor) (or the gradients through
//          the transport); (params_atom) -> blobs.
//  shadow: shadow_update (or schema::commit, then the gradients through the
//          transport) -> (synced_atom, gen, k, stage); resume_order promotes.
caf::actor spawn_stage_actor(caf::local_actor* supervisor, stage_actor_spec spec);
caf::actor spawn_shadow_actor(caf::local_actor* supervisor, stage_actor_spec spec);

} // namespace bamboo
