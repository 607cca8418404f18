// An attacker at a training cluster's manager port (no TLS), for the hostile
// tests. As a stranger (no token): CAF's own client, a raw CAF handshake
// claiming a member's node id, wrong proofs, 2,000 held connections and 400
// held unfinished hellos, and a connect flood from 127.0.0.2 during which an
// honest member joins. As a token holder: a proof as a member's node id, a
// handshake as another node than the one proven, routed and down messages
// lying about who speaks, unsealed challenges from many actor ids, a 1 GB
// header, a second join from another actor of a joined process. Prints one
// line per attack ("refused" when the manager closed the connection), the
// manager's peak RSS while connections were held, and "admitted as node N"
// when the honest join is accepted; exits 1 when it is not.
//
//   bamboo-hostile-client PORT WORKER_PID MANAGER_PID FLOOD_S  (token: $BAMBOO_TOKEN)
//   bamboo-hostile-client PORT WORKER_PID MANAGER_PID SECONDS many-addresses
//     (only the flood of held connections from 200 addresses)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp/header.hpp>
#include <caf/io/basp/message_type.hpp>

#include "actors/net/auth.hpp"
#include "actors/net/door_proof.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/network.hpp"
#include "actors/protocol.hpp"
#include "tests/loopback_dial.hpp"

using namespace bamboo;
using caf::io::basp::header;
using caf::io::basp::message_type;
using namespace std::chrono_literals;

namespace {

std::uint16_t port_ = 0;
std::string token_;

int dial(const char* from = nullptr) {
  return bamboo::test::dial_loopback(port_, from);
}

bool read_all(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    auto r = ::recv(fd, c, n, 0);
    if (r <= 0)
      return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// Whether the manager closed the connection (within two seconds).
bool closed(int fd) {
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c[4096];
  for (;;) {
    auto r = ::recv(fd, c, sizeof c, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET))
      return true;
    if (r < 0)
      return false;
  }
}

// Whether the peer has closed (without waiting).
bool closed_now(int fd) {
  char c[64];
  auto r = ::recv(fd, c, sizeof c, MSG_DONTWAIT | MSG_PEEK);
  if (r > 0) // the greeting: still open unless the close follows it
    r = ::recv(fd, c, sizeof c, MSG_DONTWAIT),
    r = ::recv(fd, c, 1, MSG_DONTWAIT | MSG_PEEK);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// A raw TCP connection that speaks BASP by hand; with a proof of the token
// (as `as`) it is let through the door, else it speaks to the door only.
struct raw_peer {
  int fd = -1;
  caf::actor_system& sys;
  caf::node_id manager;
  std::uint64_t gateway = 0;
  std::vector<std::uint8_t> door_nonce;
  bool through = false;

  explicit raw_peer(caf::actor_system& s) : sys(s) {
    fd = dial();
    if (fd < 0)
      std::exit(2);
    std::vector<std::uint8_t> g(door_greeting_bytes);
    if (!read_all(fd, g.data(), g.size()))
      return;
    if (auto n = read_door_greeting(g.data(), g.size()))
      door_nonce = *n;
  }
  ~raw_peer() { ::close(fd); }

  // Proves `token` as node `as`; true when the door answers and CAF's server
  // handshake follows (the manager's node and its published actor).
  bool prove_as(const caf::node_id& as, const std::string& token) {
    auto hello = door_hello_bytes(token, door_nonce, make_nonce(), caf::to_string(as));
    ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    std::vector<std::uint8_t> answer(door_proof_bytes);
    if (!read_all(fd, answer.data(), answer.size()))
      return false;
    auto payload = read_message();
    caf::binary_deserializer src{sys, payload};
    std::vector<std::string> app_ids;
    std::set<std::string> sigs;
    if (!payload.empty())
      src(manager, app_ids, gateway, sigs);
    through = static_cast<bool>(manager);
    return through;
  }
  std::vector<char> read_message() {
    std::vector<char> h(32);
    if (!read_all(fd, h.data(), h.size()))
      return {};
    header hdr;
    caf::binary_deserializer src{sys, h};
    src(hdr);
    std::vector<char> payload(hdr.payload_len);
    if (!read_all(fd, payload.data(), payload.size()))
      return {};
    return payload;
  }
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
  // A direct message from actor `from_actor` of the node it shook hands as.
  void direct(std::uint64_t from_actor, caf::message msg) {
    std::vector<caf::strong_actor_ptr> stages;
    send(header{message_type::direct_message, 0, 0, 0, from_actor, gateway},
         bytes(stages, msg));
  }
};

// A node on this host (the manager's: the test runs both here) with the given pid.
caf::node_id on_this_host(caf::actor_system& sys, std::uint32_t pid) {
  const auto s = caf::to_string(sys.node());
  auto n = caf::make_node_id(pid, s.substr(0, s.find('#')));
  return n ? *n : caf::node_id{};
}

caf::node_id fresh_node(caf::actor_system& sys) {
  static std::uint32_t next = 4000000000u;
  return on_this_host(sys, next++);
}

caf::message frame_msg(const schema::frame& f, schema::target t = schema::target::none) {
  return caf::make_message(to_wire(f, t));
}

void say(const std::string& attack, bool refused) {
  std::printf("%s: %s\n", attack.c_str(),
              refused ? "refused (connection closed by the manager)" : "sent");
  std::fflush(stdout);
}

long peak_rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

// An honest join with the token, as a worker's agent makes it; a second join
// from another actor of this process is asked for before it leaves.
std::optional<std::uint32_t> honest_join(caf::actor_system& sys, bool join_twice) {
  auto gw = connect_to_manager(sys, "127.0.0.1", port_, token_);
  if (!gw) {
    std::printf("honest connection failed: %s\n", caf::to_string(gw.error()).c_str());
    return std::nullopt;
  }
  auto join = [&](caf::scoped_actor& self) -> std::optional<schema::frame> {
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
    self->send(*gw, to_wire(schema::challenge_request{0xffffffffu, h.worker_nonce,
                                                      h.worker_id}));
    auto c = next();
    if (!c || !std::holds_alternative<schema::join_challenge>(*c))
      return c;
    h.manager_nonce = std::get<schema::join_challenge>(*c).nonce;
    self->send(*gw, to_wire(schema::join_request{
                        0, "z", "0.1.0", prove(token_, proof_role::worker, h), "", ""}));
    return next();
  };
  caf::scoped_actor first{sys};
  auto a = join(first);
  if (!a || !std::holds_alternative<schema::join_accept>(*a))
    return std::nullopt;
  const auto node = std::get<schema::join_accept>(*a).node;
  if (join_twice) {
    caf::scoped_actor second{sys};
    auto b = join(second);
    const bool refused = b && std::holds_alternative<schema::join_refused>(*b);
    std::printf("a second join from another actor of a joined process: %s\n",
                refused
                    ? ("refused: " + std::get<schema::join_refused>(*b).reason).c_str()
                    : "ACCEPTED");
  }
  first->send(*gw, to_wire(schema::leave{"the hostile test's honest member leaves"}));
  return node;
}

void stranger(caf::actor_system& sys, std::uint32_t worker_pid) {
  const auto member = on_this_host(sys, worker_pid);
  {
    auto gw = sys.middleman().remote_actor("127.0.0.1", port_);
    say("CAF's own connect without a proof", !gw);
  }
  {
    raw_peer p{sys};
    p.shake_hands(member);
    say("a CAF handshake claiming a member's node id, without a proof", closed(p.fd));
  }
  {
    raw_peer p{sys};
    say("a proof with a wrong token, as a member's node id",
        !p.prove_as(member, "not-the-cluster-token-0123456789") || closed(p.fd));
  }
}

// Held connections and held unfinished hellos (the door keeps 8 per address);
// the manager's peak RSS is read while they are held.
void held(caf::actor_system& sys, pid_t manager) {
  std::vector<int> fds;
  int open_after = 0;
  for (int i = 0; i < 2000; ++i)
    if (int fd = dial(); fd >= 0)
      fds.push_back(fd);
  for (int i = 0; i < 400; ++i)
    if (int fd = dial(); fd >= 0) {
      auto hello = door_hello_bytes(token_, std::vector<std::uint8_t>(32), make_nonce(),
                                    caf::to_string(fresh_node(sys)));
      ::send(fd, hello.data(), hello.size() / 2, MSG_NOSIGNAL | MSG_DONTWAIT);
      fds.push_back(fd);
    }
  std::this_thread::sleep_for(1s);
  for (int fd : fds)
    open_after += !closed_now(fd);
  std::printf("2000 held connections and 400 held unfinished hellos: %d still open "
              "after 1 s; the manager's peak RSS while held: %ld KiB\n",
              open_after, peak_rss_kib(manager));
  std::fflush(stdout);
  for (int fd : fds)
    ::close(fd);
}

void insider(caf::actor_system& sys, std::uint32_t worker_pid) {
  const auto member = on_this_host(sys, worker_pid);
  {
    raw_peer p{sys};
    say("a proof with the token as a member's node id",
        !p.prove_as(member, token_) || closed(p.fd));
  }
  {
    raw_peer p{sys};
    const bool in = p.prove_as(fresh_node(sys), token_);
    p.shake_hands(fresh_node(sys));
    say("a CAF handshake as another node than the one proven", !in || closed(p.fd));
  }
  {
    raw_peer p{sys};
    const auto me = fresh_node(sys);
    p.prove_as(me, token_);
    p.shake_hands(me);
    p.routed(member, 1, frame_msg(schema::preemption_notice{1, 10}));
    say("a preemption notice routed as a member's node", closed(p.fd));
  }
  {
    raw_peer p{sys};
    const auto me = fresh_node(sys);
    p.prove_as(me, token_);
    p.shake_hands(me);
    p.routed(p.manager, p.gateway,
             caf::make_message(broadcast_atom::value, to_wire(schema::leave{"go away"})));
    say("broadcast(leave) routed as the manager's", closed(p.fd));
  }
  {
    raw_peer p{sys};
    const auto me = fresh_node(sys);
    p.prove_as(me, token_);
    p.shake_hands(me);
    p.send(header{message_type::down_message, 0, 0, 0, 1, 0},
           p.bytes(member, p.manager, caf::error{caf::exit_reason::kill}));
    say("a down message about a member's actor", closed(p.fd));
  }
  {
    raw_peer p{sys};
    const auto me = fresh_node(sys);
    p.prove_as(me, token_);
    p.shake_hands(me);
    for (std::uint64_t id = 1; id <= 300; ++id)
      p.direct(id, frame_msg(schema::challenge_request{0xffffffffu, make_nonce(),
                                                       caf::to_string(me)}));
    say("300 unsealed challenges from actor ids 1..300", closed(p.fd));
  }
  {
    raw_peer p{sys};
    const auto me = fresh_node(sys);
    p.prove_as(me, token_);
    p.shake_hands(me);
    header h{message_type::direct_message, 0, 0, 0, 1, p.gateway};
    std::vector<char> hdr_bytes;
    caf::binary_serializer sink{sys, hdr_bytes};
    h.payload_len = 1u << 30;
    sink(h);
    std::vector<char> junk(1u << 20, 'x');
    ::send(p.fd, hdr_bytes.data(), hdr_bytes.size(), MSG_NOSIGNAL);
    ::send(p.fd, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    say("a header announcing 1 GB, then 1 MiB", closed(p.fd));
  }
}

// 200 addresses (127.0.0.2 to 127.0.0.201) each holding the 8 unproven
// connections the door allows, opened again as soon as closed, while an
// honest member joins from 127.0.0.1: the door full, a random one drawn.
std::optional<long long> many_addresses(caf::actor_system& sys, int seconds) {
  std::atomic<bool> stop{false};
  std::atomic<long> made{0};
  auto hold = [&](int first, int last) {
    std::vector<std::pair<int, std::string>> fds;
    for (int a = first; a <= last; ++a)
      for (int k = 0; k < 8; ++k)
        fds.emplace_back(-1, "127.0.0." + std::to_string(a));
    while (!stop) {
      for (auto& [fd, from] : fds) {
        if (stop)
          break;
        if (fd >= 0 && !closed_now(fd))
          continue;
        if (fd >= 0)
          ::close(fd);
        fd = dial(from.c_str());
        made += fd >= 0;
      }
      std::this_thread::sleep_for(5ms);
    }
    for (auto& [fd, from] : fds)
      if (fd >= 0)
        ::close(fd);
  };
  std::thread t(hold, 2, 101), u(hold, 102, 201);
  std::this_thread::sleep_for(2s);
  const auto t0 = std::chrono::steady_clock::now();
  auto gw = connect_to_manager(sys, "127.0.0.1", port_, token_);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  std::this_thread::sleep_until(t0 + std::chrono::seconds(seconds));
  stop = true;
  t.join();
  u.join();
  std::printf("1,600 connections held from 200 addresses (%ld opened): an honest "
              "connection through the door %s in %lld ms\n",
              made.load(), gw ? "proven" : "REFUSED", static_cast<long long>(ms));
  std::fflush(stdout);
  if (!gw)
    return std::nullopt;
  return ms;
}

// Connections from 127.0.0.2 as fast as they go, each closed at once, while an
// honest member joins from 127.0.0.1.
std::optional<std::uint32_t> flood(caf::actor_system& sys, int seconds) {
  std::atomic<bool> stop{false};
  std::atomic<long> made{0};
  auto connect_and_close = [&] {
    while (!stop) {
      int fd = dial("127.0.0.2");
      if (fd >= 0) {
        ++made;
        ::close(fd);
      }
    }
  };
  std::thread t(connect_and_close), u(connect_and_close);
  std::this_thread::sleep_for(1s);
  const auto t0 = std::chrono::steady_clock::now();
  auto node = honest_join(sys, true);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  std::printf("an honest join during the flood from 127.0.0.2: %s in %lld ms\n",
              node ? "admitted" : "NOT admitted", static_cast<long long>(ms));
  std::this_thread::sleep_until(t0 + std::chrono::seconds(seconds));
  stop = true;
  t.join();
  u.join();
  std::printf("the flood from 127.0.0.2: %ld connections in %d s\n", made.load(),
              seconds);
  std::fflush(stdout);
  return node;
}

} // namespace

int main(int argc, char** argv) {
  if ((argc != 5 && argc != 6) || !std::getenv("BAMBOO_TOKEN")) {
    std::fprintf(stderr,
                 "usage: BAMBOO_TOKEN=... %s PORT WORKER_PID MANAGER_PID FLOOD_S "
                 "[many-addresses]\n",
                 argv[0]);
    return 2;
  }
  const bool many = argc == 6 && std::string(argv[5]) == "many-addresses";
  port_ = static_cast<std::uint16_t>(std::stoi(argv[1]));
  const auto worker_pid = static_cast<std::uint32_t>(std::stoul(argv[2]));
  const auto manager_pid = static_cast<pid_t>(std::stol(argv[3]));
  const int flood_s = std::stoi(argv[4]);
  token_ = std::getenv("BAMBOO_TOKEN");
  if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0) { // 2,400 held descriptors
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  caf::actor_system_config cfg;
  configure_network(cfg);
  caf::actor_system sys{cfg};
  if (!many) {
    stranger(sys, worker_pid);
    held(sys, manager_pid);
  }
  if (many) // a process of its own: its node id is not the other run's
    return many_addresses(sys, flood_s) ? 0 : 1;
  insider(sys, worker_pid);
  auto node = flood(sys, flood_s);
  if (!node) {
    std::printf("the honest join was not admitted\n");
    return 1;
  }
  std::printf("admitted as node %u\n", *node);
  return 0;
}
