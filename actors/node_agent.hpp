// A node of the embedded cluster: its stage actor, the shadow replica of the
// successor stage, and its failure detector, all in one node_group so that a
// preemption takes them down together.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/stage_actor.hpp"
#include "model/partition.hpp"

namespace bamboo {

class token_corpus;

struct node_spec {
  train_config cfg;
  int node = 0;
  int stage = 0;
  stage_range range;
  int shadow_stage = -1; // -1: no replica on this node
  stage_range shadow_range;
  std::shared_ptr<const token_corpus> corpus;
  std::shared_ptr<transport_registry> transports;
  std::shared_ptr<preemption_injector> injector;
  std::chrono::milliseconds heartbeat_period{200};
  bool sync_through_transport = false; // see stage_actor_spec
  bool detector = true; // false: the worker process's agent heartbeats instead
};

struct node_handles {
  caf::actor stage;
  caf::actor shadow; // invalid when the node holds no replica
  caf::actor detector;
  std::shared_ptr<node_group> group;
};

// Spawns the node's actors, all monitored by `supervisor`.
node_handles spawn_node(caf::local_actor* supervisor, const node_spec& spec);

// How a manager gets a node's actors: spawn_node in embedded mode, actors that
// stand for a worker process's actors across processes.
using node_factory =
    std::function<node_handles(caf::local_actor* supervisor, const node_spec& spec)>;

} // namespace bamboo
