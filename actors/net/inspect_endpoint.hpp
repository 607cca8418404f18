// bamboo-inspect's door into an embedded run (bamboo-train --inspect-port):
// the same gateway as across processes, taking observers only, with the run's
// board, controls and actors. Across processes the manager's own gateway is
// the door.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/plan/heartbeat_tracker.hpp"

namespace bamboo {

class inspect_board;
class run_controls;
class actor_board;

struct inspect_options {
  bool enabled = false;
  std::string bind = "127.0.0.1"; // never another address unless told
  std::uint16_t port = 0;         // 0: pick one
  std::string token;              // what observers must prove
  std::string operator_token;     // what commands need besides (empty: none)
  std::function<void(std::uint16_t port)> on_listening; // on the caller's thread
};

struct inspect_endpoint {
  std::shared_ptr<inspect_board> board;
  std::shared_ptr<run_controls> controls;
  std::shared_ptr<actor_board> actors;
  caf::actor gateway;
  void close() const; // the gateway goes; attached observers see the end
};

// Publishes the endpoint (the actor system must have been configured with
// configure_network); errc::transport_failure when the port cannot be bound.
caf::expected<inspect_endpoint> open_inspect_endpoint(caf::actor_system& sys,
                                                      const inspect_options& opts,
                                                      const heartbeat_policy& heartbeats);

} // namespace bamboo
