// What a peer may say on the manager's port, read off CAF's own wire protocol
// (BASP) before CAF reads it. CAF 0.17 allocates whatever payload a header
// announces, takes a routed message's source node as claimed (so anybody can
// speak as a member, or as the manager's own actors), delivers exit and error
// messages to any actor id a peer names, and lets its named system actors be
// messaged. A peer of ours needs none of that: it shakes hands, then sends
// control frames (bamboo::wire_frame) from actors of its own node, and tells
// of its own actors' ends, and CAF asks our spawn server once for its info.
// Other messages to actors are dropped (dropped() says what they were); a
// lie about who speaks, or a size over the limit, closes the connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/node_id.hpp>

#include "schema/codec.hpp"

namespace bamboo {

inline constexpr std::size_t basp_header_bytes = 32;

struct basp_limits {
  // Before the peer has proven the token: a handshake, a challenge, a join.
  std::size_t before_join = 256 * 1024;
  // A member's frames (CAF's own encoding adds a few bytes to ours).
  std::size_t after_join = schema::default_frame_limit + 64 * 1024;
  // Sender ids a peer may name: each one makes CAF keep a proxy.
  std::size_t senders_before_join = 16;
  std::size_t senders_after_join = 1024;
};

class basp_filter {
public:
  basp_filter(caf::actor_system& sys, basp_limits limits = {});

  // A header (basp_header_bytes): the payload to read next, or a refusal
  // (refused() names why) before a byte of it is read.
  bool header(const std::uint8_t* bytes, bool admitted);
  std::size_t payload_size() const { return hdr_.payload_len; }
  // The payload of the message whose header was accepted: pass it on to CAF,
  // drop it (the connection goes on), or close the connection.
  enum class verdict { pass, drop, close };
  verdict payload(const std::uint8_t* bytes, std::size_t n, bool admitted);

  const std::string& refused() const { return why_; }
  const std::string& dropped() const { return dropped_; }
  // The peer's CAF node, from its handshake (invalid before).
  const caf::node_id& node() const { return peer_; }

private:
  bool refuse(std::string why);
  verdict close(std::string why);
  verdict drop(std::string what);
  verdict handshake(const std::uint8_t* bytes, std::size_t n);
  verdict direct(const std::uint8_t* bytes, std::size_t n, bool admitted);
  verdict about_own_actor(const std::uint8_t* bytes, std::size_t n);

  caf::actor_system& sys_;
  basp_limits limits_;
  caf::io::basp::header hdr_;
  caf::node_id peer_;
  std::set<std::uint64_t> senders_;
  std::string why_, dropped_;
  std::vector<std::uint8_t> info_request_; // CAF's one named message, as it is sent
};

} // namespace bamboo
