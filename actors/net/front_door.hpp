// The manager's port when it speaks plain TCP (no TLS): bamboo accepts the
// connections itself and lets CAF see a connection only once its peer has
// proven the cluster token and the CAF node id it will shake hands as
// (actors/net/door_proof.hpp); then it reads CAF's wire protocol with
// basp_filter before CAF does, holds the handshake to the proven node id, and
// hands CAF only what may go on, over a socket pair that no other process can
// reach. One connection per node id. What a stranger costs is bounded: a few
// hundred bytes and the time to prove (5 s), at most 8 such connections per
// address (more are closed at once) and 256 in all; over that, an unproven
// one drawn at random goes (an honest peer proves in milliseconds: a flood
// from many addresses must outpace its proof), never one that has proven the
// token. Refusals are
// logged once per address and kind with the peer's address, repeats counted.
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
  std::size_t unproven = 256; // connections whose peer has not proven the token
  std::size_t unproven_per_address = 8;
  std::chrono::milliseconds prove_within{5000};
  std::size_t unadmitted = 64; // proven, not joined yet
  std::chrono::milliseconds join_within{20000};
};

// What the door has done, for logs and tests.
struct front_door_stats {
  std::uint64_t proven = 0, refused = 0;
  std::uint64_t bytes_to_caf = 0;
  // Counted at each write to CAF's socket: 0 while the door holds.
  std::uint64_t unproven_bytes_to_caf = 0;
};

class front_door {
public:
  // Listens on bind:port (0: any free port) for `published`, and serves from
  // a thread of its own until close() (or the published actor ends). Peers
  // prove `token`.
  static caf::expected<std::shared_ptr<front_door>>
  open(caf::actor_system& sys, const caf::actor& published, std::uint16_t port,
       const std::string& bind, const std::string& token, front_door_limits limits = {});

  std::uint16_t port() const;
  front_door_stats stats() const;
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
