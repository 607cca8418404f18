// Across processes, the manager talks to proxies that stand for a worker's stage
// and shadow actors. A proxy implements the same typed stage_actor interface as
// the real stage (the compiler checks both against actors/protocol.hpp): it
// sends the manager's messages on as Cap'n Proto frames to the worker's agent
// and turns its frames back into messages, sent as itself, so the manager
// cannot tell the difference. It dies when the gateway declares its process
// lost, which is how the manager learns of the loss (a down message, as in
// embedded mode).
#pragma once

#include <cstddef>
#include <optional>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/net/frame_channel.hpp"
#include "actors/protocol.hpp"
#include "schema/codec.hpp"

namespace bamboo {

// The stage interface plus what only a proxy hears: the agent's frames, and
// the gateway's word of its process's preemption notice (deadline in ms).
using stage_proxy_actor = stage_actor::extend<caf::reacts_to<wire_frame>,
                                              caf::reacts_to<notice_atom, std::int64_t>>;

struct stage_proxy_spec {
  caf::actor agent;   // the worker process's agent
  caf::actor gateway; // declares the process lost (and this actor with it)
  int member = 0;     // the gateway's number of the process
  int node = 0;       // the manager's number of the node
  schema::target target = schema::target::stage;
  int stage = -1; // the stage it stands for: its worker reports for no other
  std::optional<schema::assign> assign; // the stage's proxy sets the node up
  std::uint64_t generation = 1;         // of the plan the proxy belongs to
  std::size_t frame_limit = schema::default_frame_limit;
};

// Spawned by (and monitored by) the manager, which gets its messages.
stage_proxy_actor spawn_stage_proxy(caf::local_actor* manager, stage_proxy_spec spec);

} // namespace bamboo
