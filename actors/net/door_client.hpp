// A client's side of the manager's door (actors/net/door_proof.hpp): connects,
// proves the cluster token and this process's CAF node id, checks the door's
// own proof, then hands the connection to CAF's broker, which shakes hands on
// it as on a connection of its own. Every step has a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

namespace bamboo {

caf::expected<caf::actor>
connect_through_door(caf::actor_system& sys, const std::string& host, std::uint16_t port,
                     const std::string& token,
                     std::chrono::milliseconds timeout = std::chrono::seconds(10));

} // namespace bamboo
