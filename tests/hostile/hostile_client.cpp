// A stranger at a training cluster's manager port (no TLS), for the hostile
// tests: what CAF lets any peer say, through CAF itself and as raw BASP
// messages that lie about who speaks, then an honest join with the token in
// the middle of the flood. Prints one line per attack, then "admitted as node
// N" when the honest join is accepted; exits 1 when it is not.
//
//   bamboo-hostile-client PORT WORKER_PID   (the token in $BAMBOO_TOKEN)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/network.hpp"
#include "actors/protocol.hpp"

using namespace bamboo;
using caf::io::basp::header;
using caf::io::basp::message_type;

namespace {

std::uint16_t port_ = 0;

// A raw TCP connection that speaks BASP by hand.
struct raw_peer {
  int fd = -1;
  caf::actor_system& sys;
  caf::node_id manager;
  std::uint64_t gateway = 0;

  explicit raw_peer(caf::actor_system& s) : sys(s) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      std::exit(2);
    // The server's handshake: its node, app ids, the published actor's id.
    auto payload = read_message();
    caf::binary_deserializer src{sys, payload};
    std::vector<std::string> app_ids;
    std::set<std::string> sigs;
    if (!payload.empty())
      src(manager, app_ids, gateway, sigs);
  }
  ~raw_peer() { ::close(fd); }

  std::vector<char> read_message() {
    std::vector<char> h(32);
    if (!read_all(h.data(), h.size()))
      return {};
    header hdr;
    caf::binary_deserializer src{sys, h};
    src(hdr);
    std::vector<char> payload(hdr.payload_len);
    if (!read_all(payload.data(), payload.size()))
      return {};
    return payload;
  }
  bool read_all(char* p, std::size_t n) {
    while (n > 0) {
      auto r = ::recv(fd, p, n, 0);
      if (r <= 0)
        return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }
  // False once the manager has closed the connection.
  bool send(header hdr, const std::vector<char>& payload) {
    hdr.payload_len = static_cast<std::uint32_t>(payload.size());
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    sink(hdr);
    buf.insert(buf.end(), payload.begin(), payload.end());
    return ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(buf.size());
  }
  template <class... Ts>
  std::vector<char> bytes(Ts&&... xs) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys, buf};
    sink(std::forward<Ts>(xs)...);
    return buf;
  }
  void shake_hands(const caf::node_id& as) {
    send(header{message_type::client_handshake, 0, 0, 0, 0, 0}, bytes(as));
  }
  // A routed message that claims to come from actor `from_actor` of `from`.
  void routed(const caf::node_id& from, std::uint64_t from_actor, caf::message msg) {
    std::vector<caf::strong_actor_ptr> stages;
    send(header{message_type::routed_message, 0, 0, 0, from_actor, gateway},
         bytes(from, manager, stages, msg));
  }
  // Whether the manager closed the connection (within a second).
  bool closed() {
    timeval tv{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    for (;;) {
      auto r = ::recv(fd, &c, 1, 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET))
        return true;
      if (r < 0)
        return false;
    }
  }
};

// A node on the manager's host (its host hash) with the given pid.
caf::node_id on_host_of(const caf::node_id& manager, std::uint32_t pid) {
  const auto s = caf::to_string(manager);
  auto n = caf::make_node_id(pid, s.substr(0, s.find('#')));
  return n ? *n : caf::node_id{};
}

// A node of our own for each raw connection (CAF's own connection from this
// process keeps its node to itself).
caf::node_id fresh_node(const caf::node_id& manager) {
  static std::uint32_t next = 4000000000u;
  return on_host_of(manager, next++);
}

caf::message frame_msg(const schema::frame& f, schema::target t = schema::target::none) {
  return caf::make_message(to_wire(f, t));
}

void say(const char* attack, bool closed) {
  std::printf("%s: %s\n", attack, closed ? "connection closed by the manager" : "sent");
  std::fflush(stdout);
}

// An honest join with the token, as a worker's agent makes it.
std::optional<std::uint32_t> honest_join(caf::actor_system& sys,
                                         const std::string& token) {
  auto gw = sys.middleman().remote_actor("127.0.0.1", port_);
  if (!gw)
    return std::nullopt;
  caf::scoped_actor self{sys};
  auto next = [&]() -> std::optional<schema::frame> {
    std::optional<schema::frame> out;
    for (int i = 0; i < 100 && !out; ++i)
      self->receive(
          [&](const wire_frame& w) {
            if (auto d = schema::decode(w.bytes);
                d && !std::holds_alternative<schema::heartbeat>(d.value))
              out = d.value;
          },
          caf::after(std::chrono::milliseconds(100)) >> [] {});
    return out;
  };
  handshake h{make_nonce(), {}, caf::to_string(sys.node()), caf::to_string(gw->node())};
  self->send(
      *gw, to_wire(schema::challenge_request{0xffffffffu, h.worker_nonce, h.worker_id}));
  auto c = next();
  if (!c || !std::holds_alternative<schema::join_challenge>(*c))
    return std::nullopt;
  h.manager_nonce = std::get<schema::join_challenge>(*c).nonce;
  self->send(*gw, to_wire(schema::join_request{
                      0, "z", "0.1.0", prove(token, proof_role::worker, h), "", ""}));
  auto a = next();
  if (!a || !std::holds_alternative<schema::join_accept>(*a))
    return std::nullopt;
  const auto node = std::get<schema::join_accept>(*a).node;
  self->send(*gw, to_wire(schema::leave{"the hostile test's honest member leaves"}));
  return node;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 3 || !std::getenv("BAMBOO_TOKEN")) {
    std::fprintf(stderr, "usage: BAMBOO_TOKEN=... %s PORT WORKER_PID\n", argv[0]);
    return 2;
  }
  port_ = static_cast<std::uint16_t>(std::stoi(argv[1]));
  const auto worker_pid = static_cast<std::uint32_t>(std::stoul(argv[2]));
  caf::actor_system_config cfg;
  configure_network(cfg);
  caf::actor_system sys{cfg};

  // Through CAF itself: an exit, an error, an empty message.
  {
    auto gw = sys.middleman().remote_actor("127.0.0.1", port_);
    if (!gw)
      return 2;
    caf::scoped_actor self{sys};
    self->send_exit(*gw, caf::exit_reason::kill);
    self->send_exit(*gw, caf::exit_reason::user_shutdown);
    self->send(*gw, caf::make_error(caf::sec::runtime_error, "a stranger's error"));
    self->send(*gw, caf::message{});
    say("exit (kill and user_shutdown), error and empty messages through CAF", false);
  }
  // As raw BASP: a frame claims to come from the manager's own gateway, or
  // from a member's node (a worker on this host: its host hash, its pid).
  {
    raw_peer p{sys};
    p.shake_hands(fresh_node(p.manager));
    p.routed(p.manager, p.gateway, caf::message{});
    say("an empty message forged as the gateway's own", p.closed());
  }
  {
    raw_peer p{sys};
    p.shake_hands(fresh_node(p.manager));
    p.routed(p.manager, p.gateway,
             caf::make_message(broadcast_atom::value, to_wire(schema::leave{"go away"})));
    say("broadcast(leave) forged as the manager's", p.closed());
  }
  {
    raw_peer p{sys};
    p.shake_hands(fresh_node(p.manager));
    for (int i = 0; i < 100; ++i)
      p.routed(p.manager, p.gateway, caf::make_message(tick_atom::value));
    say("100 ticks forged as the gateway's own", p.closed());
  }
  {
    raw_peer p{sys};
    const auto member = on_host_of(p.manager, worker_pid);
    p.shake_hands(fresh_node(p.manager));
    p.routed(member, 1, frame_msg(schema::preemption_notice{1, 10}));
    say("a preemption notice forged as a member's node", p.closed());
  }
  {
    raw_peer p{sys};
    p.shake_hands(fresh_node(p.manager));
    p.send(header{message_type::down_message, 0, 0, 0, 1, 0},
           p.bytes(on_host_of(p.manager, worker_pid), p.manager,
                   caf::error{caf::exit_reason::kill}));
    say("a down message about a member's actor", p.closed());
  }
  // Memory before a join: 1 GB announced, then 1 MiB of it, on 4 connections.
  for (int i = 0; i < 4; ++i) {
    raw_peer p{sys};
    p.shake_hands(fresh_node(p.manager));
    header h{message_type::direct_message, 0, 0, 0, 1, p.gateway};
    std::vector<char> hdr_bytes;
    caf::binary_serializer sink{sys, hdr_bytes};
    h.payload_len = 1u << 30;
    sink(h);
    std::vector<char> junk(1u << 20, 'x');
    ::send(p.fd, hdr_bytes.data(), hdr_bytes.size(), MSG_NOSIGNAL);
    ::send(p.fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    say("a header announcing 1 GB, then 1 MiB", p.closed());
  }
  // 2,000 challenges from one connection, and an honest join among them.
  auto gw = sys.middleman().remote_actor("127.0.0.1", port_);
  if (!gw)
    return 2;
  caf::scoped_actor flood{sys};
  for (int i = 0; i < 1000; ++i)
    flood->send(*gw, to_wire(schema::challenge_request{0xffffffffu, make_nonce(),
                                                       caf::to_string(sys.node())}));
  auto node = honest_join(sys, std::getenv("BAMBOO_TOKEN"));
  for (int i = 0; i < 1000; ++i)
    flood->send(*gw, to_wire(schema::challenge_request{0xffffffffu, make_nonce(),
                                                       caf::to_string(sys.node())}));
  say("2000 challenges from one connection", false);
  if (!node) {
    std::printf("the honest join was not admitted\n");
    return 1;
  }
  std::printf("admitted as node %u\n", *node);
  return 0;
}
