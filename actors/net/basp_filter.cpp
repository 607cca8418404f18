#include "actors/net/basp_filter.hpp"

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/basp/message_type.hpp>
#include <caf/message.hpp>

namespace bamboo {

namespace {

using caf::io::basp::message_type;

// How CAF 0.17 names the one message type a peer sends us (message::save):
// "@<>" and '+' before each element's registered name.
const std::string frame_type_name = "@<>+bamboo::wire_frame";
// A peer's spawn server answering our broker's (sys_atom, get_atom, "info").
const std::string spawn_info_type_name = "@<>+@atom+@str+@strong_actor_ptr+@str";

caf::binary_deserializer reader(caf::actor_system& sys, const std::uint8_t* bytes,
                                std::size_t n) {
  return caf::binary_deserializer{sys, reinterpret_cast<const char*>(bytes), n};
}

} // namespace

basp_filter::basp_filter(caf::actor_system& sys, basp_limits limits)
    : sys_(sys), limits_(limits) {
  // What CAF's broker sends a new peer's spawn server (learned_new_node):
  // the empty forwarding stack, then (sys_atom, get_atom, "info").
  std::vector<char> buf;
  caf::binary_serializer sink{sys_, buf};
  std::vector<caf::strong_actor_ptr> stages;
  auto msg =
      caf::make_message(caf::sys_atom::value, caf::get_atom::value, std::string("info"));
  if (!sink(stages, msg))
    info_request_.assign(buf.begin(), buf.end());
}

bool basp_filter::refuse(std::string why) {
  why_ = std::move(why);
  return false;
}

basp_filter::verdict basp_filter::close(std::string why) {
  why_ = std::move(why);
  return verdict::close;
}

basp_filter::verdict basp_filter::drop(std::string what) {
  dropped_ = std::move(what);
  return verdict::drop;
}

bool basp_filter::header(const std::uint8_t* bytes, bool admitted) {
  auto src = reader(sys_, bytes, basp_header_bytes);
  if (src(hdr_))
    return refuse("an unreadable header");
  const auto limit = admitted ? limits_.after_join : limits_.before_join;
  if (hdr_.payload_len > limit)
    return refuse("a payload of " + std::to_string(hdr_.payload_len) +
                  " bytes announced " + (admitted ? "" : "before a join ") + "(limit " +
                  std::to_string(limit) + ")");
  return true;
}

basp_filter::verdict basp_filter::payload(const std::uint8_t* bytes, std::size_t n,
                                          bool admitted) {
  const bool shook = static_cast<bool>(peer_);
  switch (hdr_.operation) {
  case message_type::client_handshake: return handshake(bytes, n);
  case message_type::heartbeat:
    return n == 0 ? verdict::pass : close("a heartbeat with a payload");
  case message_type::direct_message:
    return shook ? direct(bytes, n, admitted) : close("a message before the handshake");
  case message_type::monitor_message:
  case message_type::down_message:
    return shook ? about_own_actor(bytes, n)
                 : close("a monitor or down message before the handshake");
  case message_type::routed_message:
    return close("a routed message (a peer speaks only for its own node)");
  case message_type::server_handshake:
    return close("a server handshake (the manager is the server)");
  }
  return close("an unknown operation " +
               std::to_string(static_cast<int>(hdr_.operation)));
}

basp_filter::verdict basp_filter::handshake(const std::uint8_t* bytes, std::size_t n) {
  auto src = reader(sys_, bytes, n);
  caf::node_id node;
  if (src(node) || !node)
    return close("a handshake without a valid node id");
  if (node == sys_.node())
    return close("a handshake that claims the manager's own node");
  if (peer_ && node != peer_) // CAF repeats it to select the connection
    return close("a second handshake as another node");
  peer_ = std::move(node);
  return verdict::pass;
}

basp_filter::verdict basp_filter::direct(const std::uint8_t* bytes, std::size_t n,
                                         bool admitted) {
  if (hdr_.has(caf::io::basp::header::named_receiver_flag)) {
    const bool info =
        hdr_.dest_actor == static_cast<std::uint64_t>(caf::atom("SpawnServ")) &&
        n == info_request_.size() && !info_request_.empty() &&
        std::equal(bytes, bytes + n, info_request_.begin());
    return info ? verdict::pass : drop("a message to a named CAF system actor");
  }
  if (hdr_.source_actor != 0 && senders_.count(hdr_.source_actor) == 0) {
    const auto cap = admitted ? limits_.senders_after_join : limits_.senders_before_join;
    if (senders_.size() >= cap)
      return close("more than " + std::to_string(cap) + " sender ids");
    senders_.insert(hdr_.source_actor);
  }
  // The forwarding stack (always empty from a peer of ours), then the type
  // names of the message's elements: exactly one control frame.
  auto src = reader(sys_, bytes, n);
  std::size_t stages = 0;
  if (src.begin_sequence(stages) || stages != 0)
    return drop("a message with a forwarding stack");
  std::uint16_t type_nr = 0;
  std::string type_name;
  if (src.begin_object(type_nr, type_name))
    return drop("a message without readable type names");
  if (type_name == spawn_info_type_name) // the answer to our broker's ask: unused
    return drop("");
  if (type_nr != 0 || type_name != frame_type_name)
    return drop("a message that is not a control frame (" +
                (type_name.empty() ? std::string("type ") + std::to_string(type_nr)
                                   : type_name.substr(0, 64)) +
                ")");
  return verdict::pass;
}

basp_filter::verdict basp_filter::about_own_actor(const std::uint8_t* bytes,
                                                  std::size_t n) {
  auto src = reader(sys_, bytes, n);
  caf::node_id from, to;
  if (src(from, to))
    return close("an unreadable monitor or down message");
  if (from != peer_ || to != sys_.node())
    return close("a monitor or down message about another node's actor");
  return verdict::pass;
}

} // namespace bamboo
