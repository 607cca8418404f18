// The manager's front door over real sockets on 127.0.0.1: what a peer hears
// before it proves the cluster token (a greeting, nothing of CAF), what a
// proof opens, and what the door closes.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp/header.hpp>

#include "actors/net/door_proof.hpp"
#include "actors/net/front_door.hpp"
#include "actors/net/network.hpp"
#include "tests/loopback_dial.hpp"

using namespace bamboo;
using namespace std::chrono_literals;

namespace {

const std::string door_token = "the front door's test token 0123";

struct door_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::actor published;
  std::shared_ptr<front_door> door;
  explicit door_fixture(front_door_limits limits = {})
      : sys((configure_network(cfg), cfg)),
        // With an argument: CAF 0.17 dereferences a null tuple for a
        // function spawned with none (UBSan reports it).
        published(sys.spawn(
            [](int) -> caf::behavior { return {[](int x) { return x; }}; }, 0)) {
    auto d = front_door::open(sys, published, 0, "127.0.0.1", door_token, limits);
    REQUIRE(d);
    door = *d;
  }
  ~door_fixture() {
    door->close();
    caf::anon_send_exit(published, caf::exit_reason::user_shutdown);
  }
  caf::node_id node(std::uint32_t pid) const {
    const auto s = caf::to_string(sys.node());
    auto n = caf::make_node_id(pid, s.substr(0, s.find('#')));
    return n ? *n : caf::node_id{};
  }
};

struct peer {
  int fd = -1;
  peer(std::uint16_t port, const char* from = nullptr) {
    fd = test::dial_loopback(port, from);
    REQUIRE(fd >= 0);
  }
  ~peer() { ::close(fd); }
  // Up to n bytes within the timeout; fewer when the door closed or went quiet.
  std::vector<std::uint8_t> read(std::size_t n, std::chrono::milliseconds timeout = 2s) {
    std::vector<std::uint8_t> out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        break;
      std::uint8_t buf[4096];
      auto r = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
      if (r <= 0)
        break;
      out.insert(out.end(), buf, buf + r);
    }
    return out;
  }
  // Whether the door closed the connection within the timeout.
  bool closed(std::chrono::milliseconds timeout = 2s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0)
        continue;
      std::uint8_t buf[4096];
      auto r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0)
        return true;
    }
    return false;
  }
  std::vector<std::uint8_t> greeting() { return read(door_greeting_bytes); }
  void send(const std::vector<std::uint8_t>& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
  }
};

} // namespace

TEST_CASE("a peer hears the door's greeting and nothing of CAF until it proves the "
          "token - then the door's answer checks out and CAF's handshake follows",
          "[actors]") {
  door_fixture f;
  peer p{f.door->port()};
  const auto g = p.greeting();
  auto nonce = read_door_greeting(g.data(), g.size());
  REQUIRE(nonce);
  CHECK(p.read(1, 300ms).empty()); // CAF's handshake is held
  CHECK(f.door->stats().bytes_to_caf == 0);
  const auto me = caf::to_string(f.node(4100000001u));
  const auto client_nonce = make_nonce();
  p.send(door_hello_bytes(door_token, *nonce, client_nonce, me));
  const auto answer = p.read(door_proof_bytes);
  CHECK(check_door_answer(door_token, *nonce, {client_nonce, me, {}}, answer));
  // CAF's server handshake: a BASP header announcing its payload.
  const auto hdr = p.read(32);
  REQUIRE(hdr.size() == 32);
  CHECK(hdr[0] ==
        static_cast<std::uint8_t>(caf::io::basp::message_type::server_handshake));
  const auto st = f.door->stats();
  CHECK(st.proven == 1);
  CHECK(st.unproven_bytes_to_caf == 0);
}

TEST_CASE("the door closes a wrong proof, CAF's own handshake, a silent peer at its "
          "deadline and a second connection proving a connected node id",
          "[actors]") {
  front_door_limits limits;
  limits.prove_within = 400ms;
  door_fixture f{limits};
  {
    peer p{f.door->port()};
    auto nonce = read_door_greeting(p.greeting().data(), door_greeting_bytes);
    REQUIRE(nonce);
    p.send(door_hello_bytes("a wrong token, long enough 01234", *nonce, make_nonce(),
                            caf::to_string(f.node(4100000002u))));
    CHECK(p.closed());
  }
  {
    peer p{f.door->port()};
    p.greeting();
    p.send(std::vector<std::uint8_t>(32, 0)); // a BASP header, not a hello
    CHECK(p.closed());
  }
  {
    peer p{f.door->port()};
    p.greeting();
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(p.closed(3s));
    const auto waited = std::chrono::steady_clock::now() - t0;
    INFO("closed after "
         << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()
         << " ms");
    CHECK(waited >= 350ms);
  }
  const auto node = caf::to_string(f.node(4100000003u));
  peer first{f.door->port()};
  auto n1 = read_door_greeting(first.greeting().data(), door_greeting_bytes);
  REQUIRE(n1);
  first.send(door_hello_bytes(door_token, *n1, make_nonce(), node));
  CHECK(first.read(door_proof_bytes).size() == door_proof_bytes);
  peer second{f.door->port()};
  auto n2 = read_door_greeting(second.greeting().data(), door_greeting_bytes);
  REQUIRE(n2);
  second.send(door_hello_bytes(door_token, *n2, make_nonce(), node));
  CHECK(second.closed());
  CHECK(f.door->stats().refused == 4);
  CHECK(f.door->stats().unproven_bytes_to_caf == 0);
}

TEST_CASE("past 8 unproven connections from one address the door closes new ones from "
          "it at once - and another address is still greeted",
          "[actors]") {
  door_fixture f;
  std::vector<std::unique_ptr<peer>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<peer>(f.door->port(), "127.0.0.2"));
    CHECK(held.back()->greeting().size() == door_greeting_bytes);
  }
  peer ninth{f.door->port(), "127.0.0.2"};
  CHECK(ninth.read(door_greeting_bytes, 1s).empty());
  CHECK(ninth.closed());
  peer other{f.door->port(), "127.0.0.1"};
  CHECK(other.greeting().size() == door_greeting_bytes);
  // The held ones are still open: nobody was evicted to make room.
  for (auto& p : held)
    CHECK_FALSE(p->closed(10ms));
}

TEST_CASE("a hello is read field by field - a wrong magic, an empty or oversized node "
          "id, or bytes past its end are refused",
          "[actors]") {
  const auto nonce = make_nonce();
  auto bytes = door_hello_bytes(door_token, nonce, make_nonce(), "ab#1");
  door_hello_reader r;
  for (auto b : bytes) { // a byte at a time
    REQUIRE(r.wanted() >= 1);
    REQUIRE(r.feed(&b, 1));
  }
  CHECK(r.complete());
  CHECK(r.wanted() == 0);
  CHECK(r.hello().node == "ab#1");
  CHECK(check_door_hello(door_token, nonce, r.hello()));
  CHECK_FALSE(check_door_hello("another token of the same length!", nonce, r.hello()));
  auto bad = bytes;
  bad[0] ^= 1;
  door_hello_reader wrong_magic;
  CHECK_FALSE(wrong_magic.feed(bad.data(), door_hello_head));
  for (std::uint8_t len : {std::uint8_t{0}, std::uint8_t{door_max_node_id + 1}}) {
    bad = bytes;
    bad[door_hello_head - 1] = len;
    door_hello_reader r2;
    CHECK_FALSE(r2.feed(bad.data(), door_hello_head));
  }
  door_hello_reader past;
  CHECK_FALSE(past.feed(bytes.data(), door_hello_head + 1));
}

TEST_CASE("a door full of unproven connections from many addresses draws one of them to "
          "make room for a newcomer - never a connection that has proven the token",
          "[actors]") {
  front_door_limits limits;
  limits.unproven = 4;
  door_fixture f{limits};
  peer member{f.door->port(), "127.0.0.1"};
  auto n = read_door_greeting(member.greeting().data(), door_greeting_bytes);
  REQUIRE(n);
  member.send(door_hello_bytes(door_token, *n, make_nonce(),
                               caf::to_string(f.node(4100000009u))));
  REQUIRE(member.read(door_proof_bytes).size() == door_proof_bytes);
  std::vector<std::unique_ptr<peer>> strangers;
  for (const char* from : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    strangers.push_back(std::make_unique<peer>(f.door->port(), from));
    REQUIRE(strangers.back()->greeting().size() == door_greeting_bytes);
  }
  peer newcomer{f.door->port(), "127.0.0.6"};
  CHECK(newcomer.greeting().size() == door_greeting_bytes);
  int closed = 0;
  for (auto& p : strangers)
    closed += p->closed(300ms);
  CHECK(closed == 1);
  CHECK_FALSE(member.closed(100ms));
}
