// The manager's front door for worker processes: challenge-response joins with
// the cluster token, node ids, heartbeats and the detection of lost workers (a
// dropped connection or missed heartbeats). A node declared lost is fenced: its
// later frames are refused, and it must join again as a new node.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "schema/codec.hpp"

namespace bamboo {

struct gateway_spec {
  std::string token;
  std::size_t frame_limit = schema::default_frame_limit;
  std::uint16_t store_port = 0; // the tensor transport's rendezvous store
  std::chrono::milliseconds heartbeat_period{200};
  int heartbeat_misses = 5;
};

caf::actor spawn_gateway(caf::actor_system& sys, gateway_spec spec);

} // namespace bamboo
