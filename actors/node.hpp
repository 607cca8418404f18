// A node's actors: its stage actor, the shadow replica of the successor stage
// and (in embedded mode) its failure detector, all in one node_group so that a
// preemption takes them down together. spawn_node is what a worker process's
// agent and the embedded cluster both call.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"
#include "actors/protocol.hpp"
#include "model/config.hpp"
#include "model/partition.hpp"

namespace bamboo {

class token_corpus;
class transport_registry;
class preemption_injector;
class actor_board;
class stage_executor;
struct checkpoint;

// The actors of one node: when the node is preempted they all die at once.
class node_group {
public:
  template <class Handle>
  void add(const Handle& h) {
    add_ptr(caf::actor_cast<caf::strong_actor_ptr>(h));
  }
  // Kills every member but `except` (the caller, which ends itself).
  void kill_all(const caf::actor_addr& except);

private:
  void add_ptr(caf::strong_actor_ptr p);
  std::mutex mtx_;
  std::vector<caf::strong_actor_ptr> members_;
};

// How a shadow gets its owner's gradients after each step.
enum class shadow_sync {
  hand_off,  // in-process: a shadow_update message with the tensors
  transport, // across processes: one flat tensor to the predecessor's rank
};

// What the manager decides for a node.
struct node_assignment {
  int node = 0;
  int pipeline = 0; // its stage and replica are of this pipeline
  int stage = 0;
  stage_range range;
  int shadow_stage = -1; // -1: no replica on this node
  stage_range shadow_range;
};

// What the node's actors run with.
struct node_resources {
  train_config cfg;
  std::shared_ptr<const token_corpus> corpus;
  std::shared_ptr<transport_registry> transports;
  std::shared_ptr<preemption_injector> injector; // may be null
  shadow_sync sync = shadow_sync::hand_off;
  // Embedded mode: a detector heartbeats the supervisor at this period. In a
  // worker process the agent heartbeats for the whole process instead.
  bool detector = true;
  std::chrono::milliseconds heartbeat_period = default_heartbeat_period;
  // A resumed run: every executor starts from this checkpoint (checked to
  // hold each stage's tensors before the nodes are spawned).
  std::shared_ptr<const checkpoint> resume;
  // Where the node's actors say what they are doing (bamboo-inspect); may be null.
  std::shared_ptr<actor_board> actors;
  // The nodes' names in logs, by plan number (empty: the number itself).
  std::vector<int> names;
};

struct node_handles {
  stage_actor stage;
  stage_actor shadow; // invalid when the node holds no replica
  caf::actor detector;
  std::shared_ptr<node_group> group;
};

// Spawns the node's actors, all monitored by `supervisor`.
node_handles spawn_node(caf::local_actor* supervisor, const node_assignment& a,
                        const node_resources& r);

// A replica added later to node `node`'s group (a new shadow at a step
// boundary), running `executor` with the node's resources; monitored by
// `supervisor`, and it dies with the group.
stage_actor spawn_replica(caf::local_actor* supervisor, int node, const node_resources& r,
                          std::shared_ptr<stage_executor> executor,
                          std::shared_ptr<node_group> group);

} // namespace bamboo
