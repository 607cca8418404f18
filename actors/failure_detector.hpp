// The heartbeat sender of a node: an event-based actor on CAF's scheduler that
// sends schema::heartbeat to its target every period, so a stage's long
// backward pass (on a thread of its own) never delays it. In embedded mode the
// target is the manager; in a worker process it is the process's agent, which
// turns each heartbeat into a frame for the manager. Who has been silent for
// too long is the heartbeat_tracker's call (actors/plan/heartbeat_tracker.hpp).
#pragma once

#include <chrono>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"

namespace bamboo {

class actor_board;

// Spawns node `node`'s detector, monitored by `parent`; it heartbeats `target`
// until it is killed.
// With a board, its row says how many heartbeats it sent.
caf::actor spawn_failure_detector(caf::local_actor* parent, int node, caf::actor target,
                                  std::chrono::milliseconds period,
                                  std::shared_ptr<actor_board> actors = nullptr);

} // namespace bamboo
