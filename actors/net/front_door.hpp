// The manager's port when it speaks plain TCP (no TLS): bamboo accepts the
// connections itself, reads CAF's wire protocol with basp_filter before CAF
// does, and hands CAF only what may go on, over a socket pair that no other
// process can reach. What a connection may make the manager hold is bounded
// before its peer has proven the cluster token: the frame size (checked on the
// header, before the payload is read), the sender ids, the time to join, and
// the number of such connections (the oldest goes first). A refused
// connection is closed and logged once with its address.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "actors/net/basp_filter.hpp"

namespace bamboo {

struct front_door_limits {
  basp_limits frames;
  std::size_t unadmitted = 64; // connections whose peer has not joined
  std::chrono::milliseconds join_within{20000};
};

class front_door {
public:
  // Listens on bind:port (0: any free port) for `published`, and serves from
  // a thread of its own until close() (or the published actor ends).
  static caf::expected<std::shared_ptr<front_door>>
  open(caf::actor_system& sys, const caf::actor& published, std::uint16_t port,
       const std::string& bind, front_door_limits limits = {});

  std::uint16_t port() const;
  void close();
  ~front_door();

  struct impl;

private:
  explicit front_door(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

// What this process's front doors know of their peers, for the gateway: a
// peer the gateway admits (it proved the token) gets the members' limits, and
// its address names it in logs.
namespace peer_book {
void admit(const caf::node_id& node);
void forget(const caf::node_id& node);
bool admitted(const caf::node_id& node);
std::optional<std::string> address(const caf::node_id& node);
} // namespace peer_book

} // namespace bamboo
