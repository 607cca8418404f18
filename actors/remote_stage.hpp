// Across processes, the manager talks to actors that stand for a worker's stage
// and shadow actors: they take the manager's messages (the same as in embedded
// mode), send them on as Cap'n Proto frames to the worker's agent, and turn its
// frames back into messages, sent as themselves, so the manager cannot tell
// the difference. They die when the gateway declares their process lost, which
// is how the manager learns of the loss (a down message, as in embedded mode).
#pragma once

#include <cstddef>
#include <optional>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "schema/codec.hpp"

namespace bamboo {

struct remote_stage_spec {
  caf::actor agent;   // the worker process's agent
  caf::actor gateway; // declares the process lost (and this actor with it)
  int member = 0;     // the gateway's number of the process
  int node = 0;       // the manager's number of the node
  schema::target target = schema::target::stage;
  std::optional<schema::assign> assign; // the stage's actor sets the node up
  std::size_t frame_limit = schema::default_frame_limit;
};

// Spawned by (and monitored by) the manager, which gets its messages.
caf::actor spawn_remote_stage(caf::local_actor* manager, remote_stage_spec spec);

} // namespace bamboo
