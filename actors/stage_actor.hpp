// The actor of one pipeline stage (the typed `stage_actor` of protocol.hpp), in
// one of two modes, one behavior each:
//   active: runs the stage's instructions each step, commits, syncs its shadow;
//   shadow: holds the replica of a successor stage, applies the owner's
//           gradients, and becomes active when promoted.
// Spawned detached: LibTorch compute runs on a thread of its own and never holds
// up CAF's scheduler (or a heartbeat).
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/node.hpp"
#include "actors/protocol.hpp"
#include "model/config.hpp"

namespace bamboo {

class stage_executor;
class transport_registry;
class preemption_injector;
class actor_board;

struct stage_actor_spec {
  train_config cfg;
  int node = 0; // the plan's number of the node
  int name = 0; // the node's name in logs (embedded runs renumber after a rollback)
  std::shared_ptr<stage_executor> executor;
  std::shared_ptr<stage_executor> replica;        // active: the node's shadow, for FRC
  std::shared_ptr<transport_registry> transports; // each generation's groups
  std::shared_ptr<preemption_injector> injector;  // may be null
  std::shared_ptr<node_group> group;
  shadow_sync sync = shadow_sync::hand_off;
  std::shared_ptr<actor_board> actors; // may be null; where bamboo-inspect sees it
};

// Both report to `supervisor` (the manager or a worker's agent), which monitors them.
stage_actor spawn_stage_actor(caf::local_actor* supervisor, stage_actor_spec spec);
stage_actor spawn_shadow_actor(caf::local_actor* supervisor, stage_actor_spec spec);

} // namespace bamboo
