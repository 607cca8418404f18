// The manager's front door against a worker that has joined properly (the
// challenge-response with the cluster token) and then sends well-framed but
// malformed Cap'n Proto frames: each reaches the gateway's decoder, the sender
// is told once, and the member keeps its place as long as its heartbeats come.
#include <catch2/catch.hpp>

#include <caf/all.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/stage_proxy.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/system.hpp"
#include "control.capnp.h"
#include "control_next.capnp.h"

using namespace bamboo;
using namespace std::chrono_literals;

namespace {

std::vector<std::uint8_t> bytes_of(capnp::MallocMessageBuilder& msg) {
  auto words = capnp::messageToFlatArray(msg);
  auto b = words.asBytes();
  return {b.begin(), b.end()};
}

struct joined_member {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> worker, listener;
  caf::actor gateway;
  heartbeat_policy policy{100ms, 3};
  std::string token = "a cluster token of 32 bytes here";

  joined_member() {
    configure(cfg);
    register_frames(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    worker = std::make_unique<caf::scoped_actor>(*sys);
    listener = std::make_unique<caf::scoped_actor>(*sys);
    gateway_spec gs;
    gs.token = token;
    gs.heartbeats = policy;
    gs.listener = caf::actor(*listener);
    gateway = spawn_gateway(*sys, gs);
  }
  ~joined_member() { caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown); }

  void send(const schema::frame& f) { (*worker)->send(gateway, to_wire(f)); }
  void send_bytes(std::vector<std::uint8_t> b) {
    (*worker)->send(gateway, wire_frame{std::move(b), {}});
  }
  // The next frame the gateway sends the worker, or nullopt after `timeout`;
  // the manager's heartbeats are counted, not returned.
  std::optional<schema::frame> next(std::chrono::milliseconds timeout = 2s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      std::optional<schema::frame> out;
      (*worker)->receive(
          [&](const wire_frame& w) {
            auto d = schema::decode(w.bytes);
            REQUIRE(d);
            out = d.value;
          },
          caf::after(left) >> [] {});
      if (!out)
        return out;
      auto* hb = std::get_if<schema::heartbeat>(&*out);
      if (!hb || hb->node != manager_node)
        return out;
      ++manager_beats;
    }
  }
  int manager_beats = 0;
  // Joins as the cluster token's holder; returns the member number.
  int join() {
    handshake h{
        make_nonce(), {}, caf::to_string(sys->node()), caf::to_string(sys->node())};
    send(schema::challenge_request{0xffffffffu, h.worker_nonce, h.worker_id});
    auto c = next();
    REQUIRE(c);
    const auto& challenge = std::get<schema::join_challenge>(*c);
    h.manager_nonce = challenge.nonce;
    REQUIRE(check_proof(token, proof_role::manager, h, challenge.proof));
    send(schema::join_request{0, "zone-a", "0.1.0", prove(token, proof_role::worker, h),
                              "", ""});
    auto a = next();
    REQUIRE(a);
    REQUIRE(std::holds_alternative<schema::join_accept>(*a));
    int member = -1;
    (*listener)->receive(
        [&](joined_atom, int id, caf::actor, const std::string&) { member = id; },
        caf::after(2s) >> [] {});
    REQUIRE(member == static_cast<int>(std::get<schema::join_accept>(*a).node));
    accept = std::get<schema::join_accept>(*a);
    return member;
  }
  schema::join_accept accept;
  // Whether the listener hears of the member's loss within `timeout`.
  bool lost_within(std::chrono::milliseconds timeout) {
    bool lost = false;
    (*listener)->receive([&](lost_atom, int) { lost = true; },
                         caf::after(timeout) >> [] {});
    return lost;
  }
};

} // namespace

TEST_CASE("malformed frames from a joined member reach the gateway's decoder, are "
          "rejected once, and cost the member nothing while it heartbeats",
          "[actors][net]") {
  joined_member m;
  const int member = m.join();
  auto beat = [&] {
    m.send(schema::heartbeat{static_cast<std::uint32_t>(member), 0, 0, 0, {}});
  };
  beat();

  // Another major version.
  capnp::MallocMessageBuilder major;
  auto r1 = major.initRoot<wire::Frame>();
  r1.setMajor(schema::major_version + 1);
  r1.initBody().initHeartbeat().setNode(static_cast<std::uint32_t>(member));
  m.send_bytes(bytes_of(major));
  // A body kind of a newer minor version.
  capnp::MallocMessageBuilder newer;
  auto r2 = newer.initRoot<wire_next::Frame>();
  r2.setMajor(1);
  r2.setMinor(7);
  r2.initBody().initDrain().setNode(2);
  m.send_bytes(bytes_of(newer));
  // A consistent segment table whose root pointer points far outside its segment.
  std::vector<std::uint8_t> lying(16, 0);
  lying[4] = 1;                                    // one segment of one word
  lying[8] = static_cast<std::uint8_t>(1000 << 2); // struct pointer, offset 1000
  lying[9] = static_cast<std::uint8_t>((1000 << 2) >> 8);
  lying[12] = 1; // one data word
  m.send_bytes(lying);
  // A valid frame cut short, and one over the size limit.
  auto good = schema::encode(schema::step_report{1, 1, 1, 1, 1.0, 1.0, 1, 1, 0, 0, {}});
  m.send_bytes({good.begin(), good.end() - 8});
  m.send_bytes(std::vector<std::uint8_t>(schema::default_frame_limit + 8, 0));

  // Told once, with the first reason, so two peers never bounce rejections.
  auto rejected = m.next();
  REQUIRE(rejected);
  REQUIRE(std::holds_alternative<schema::frame_rejected>(*rejected));
  CHECK(std::get<schema::frame_rejected>(*rejected).reason.find("major") !=
        std::string::npos);
  for (int i = 0; i < 3; ++i) { // nothing more for the other bad frames
    beat();
    CHECK_FALSE(m.next(100ms));
  }

  // Still a member: heartbeats for 3 x the timeout keep it, silence loses it.
  const auto keep_until = std::chrono::steady_clock::now() + 3 * m.policy.timeout();
  while (std::chrono::steady_clock::now() < keep_until) {
    beat();
    CHECK_FALSE(m.lost_within(m.policy.period / 2));
  }
  // Declared lost within the timeout plus a tick, with room for a loaded machine.
  CHECK(m.lost_within(m.policy.timeout() + m.policy.period + 2s));
}

TEST_CASE("the gateway heartbeats to every member at the heartbeat period, and says "
          "how many silent periods make the manager lost",
          "[actors][net]") {
  joined_member m;
  const int member = m.join();
  // Ten periods of a member that heartbeats itself (else it is lost).
  for (int i = 0; i < 20; ++i) {
    m.send(schema::heartbeat{static_cast<std::uint32_t>(member), 0, 0, 0, {}});
    CHECK_FALSE(m.next(m.policy.period / 2)); // nothing but heartbeats
  }
  // One a period, with room for a loaded machine.
  CHECK(m.manager_beats >= 5);
  CHECK(m.manager_beats <= 11);
  CHECK(m.accept.heartbeat_ms == m.policy.period.count());
  CHECK(m.accept.heartbeat_misses ==
        static_cast<std::uint32_t>(m.policy.manager_misses()));
  CHECK(m.accept.heartbeat_misses * m.policy.period >= m.policy.manager_timeout);
}

TEST_CASE("the gateway refuses a second join of a member and a join that claims another "
          "node's identity, and ignores broadcasts and ticks from outside its process",
          "[actors][net]") {
  joined_member m;
  const int member = m.join();
  auto beat = [&] {
    m.send(schema::heartbeat{static_cast<std::uint32_t>(member), 0, 0, 0, {}});
  };
  // The same process asks again: no second node slot.
  m.send(schema::challenge_request{0xffffffffu, make_nonce(),
                                   caf::to_string(m.sys->node())});
  auto again = m.next();
  REQUIRE(again);
  REQUIRE(std::holds_alternative<schema::join_refused>(*again));
  CHECK(std::get<schema::join_refused>(*again).reason == "already joined as node 0");

  // A relay presents the handshake of the node behind it: refused at once.
  caf::scoped_actor relay{*m.sys};
  relay->send(m.gateway, to_wire(schema::challenge_request{0xffffffffu, make_nonce(),
                                                           "another node"}));
  std::optional<schema::frame> refused;
  relay->receive(
      [&](const wire_frame& w) {
        auto d = schema::decode(w.bytes);
        REQUIRE(d);
        refused = d.value;
      },
      caf::after(2s) >> [] {});
  REQUIRE(refused);
  REQUIRE(std::holds_alternative<schema::join_refused>(*refused));
  CHECK(std::get<schema::join_refused>(*refused).reason ==
        "the identity is not the sender's node");

  // Anonymous messages could be any peer's: a broadcast "leave" reaches nobody,
  // and 100,000 ticks start no timer (the manager's heartbeats keep their period).
  caf::anon_send(m.gateway, broadcast_atom::value, to_wire(schema::leave{"go away"}));
  for (int i = 0; i < 100000; ++i)
    caf::anon_send(m.gateway, tick_atom::value);
  m.manager_beats = 0;
  for (int i = 0; i < 20; ++i) {
    beat();
    CHECK_FALSE(m.next(m.policy.period / 2)); // no leave, only heartbeats
  }
  CHECK(m.manager_beats <= 12);
  CHECK_FALSE(m.lost_within(10ms));
}

TEST_CASE("a peer that answers a proper challenge without the token is refused - wrong "
          "cluster token",
          "[actors][net]") {
  joined_member m; // nobody of this process has joined: the guesser may ask
  caf::scoped_actor guesser{*m.sys};
  handshake h{
      make_nonce(), {}, caf::to_string(m.sys->node()), caf::to_string(m.sys->node())};
  guesser->send(m.gateway, to_wire(schema::challenge_request{0xffffffffu, h.worker_nonce,
                                                             h.worker_id}));
  std::vector<schema::frame> answers;
  auto answer = [&] {
    guesser->receive(
        [&](const wire_frame& w) {
          auto d = schema::decode(w.bytes);
          REQUIRE(d);
          answers.push_back(d.value);
        },
        caf::after(2s) >> [] {});
  };
  answer();
  REQUIRE(answers.size() == 1);
  h.manager_nonce = std::get<schema::join_challenge>(answers[0]).nonce;
  guesser->send(
      m.gateway,
      to_wire(schema::join_request{
          0, "zone-a", "0.1.0",
          prove("a guess of the cluster token", proof_role::worker, h), "", ""}));
  answer();
  REQUIRE(answers.size() == 2);
  REQUIRE(std::holds_alternative<schema::join_refused>(answers[1]));
  CHECK(std::get<schema::join_refused>(answers[1]).reason == "wrong cluster token");
}

TEST_CASE("a stage proxy passes on its worker's reports for the stage it stands for and "
          "refuses reports for any other stage, in range or not",
          "[actors][net]") {
  // The proxy's member must be alive (the gateway ends a proxy whose member is
  // not, a race with the reports): it joins and heartbeats throughout.
  joined_member m;
  const int member = m.join();
  auto beat = [&] {
    m.send(schema::heartbeat{static_cast<std::uint32_t>(member), 0, 0, 0, {}});
  };
  beat();
  caf::scoped_actor manager{*m.sys}, worker{*m.sys};
  stage_proxy_spec ps;
  ps.agent = caf::actor(worker);
  ps.gateway = m.gateway;
  ps.node = member;
  ps.stage = 1;
  ps.target = schema::target::stage;
  auto proxy = spawn_stage_proxy(manager.ptr(), ps);
  auto from_worker = [&](const schema::frame& f) {
    worker->send(caf::actor_cast<caf::actor>(proxy), to_wire(f));
  };
  for (std::uint32_t stage : {2u, 99u, 0xffffffffu, 1u}) {
    from_worker(schema::step_report{1, stage, 1, 0, 1.5, 2.0, 2, 2, 0, 0, {}});
    from_worker(to_event<schema::committed>(1, 0, static_cast<int>(stage)));
  }
  // The proxy handles its mailbox in order: once stage 1's report and commit
  // are through, the refused ones before them are decided. A deadline, not a
  // quiet period, so a slow machine (a sanitizer build) waits longer.
  std::vector<std::uint32_t> reported, committed;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (bool more = true; more;)
    manager->receive([&](const schema::step_report& r) { reported.push_back(r.stage); },
                     [&](committed_atom, std::uint64_t, std::int64_t, int s) {
                       committed.push_back(static_cast<std::uint32_t>(s));
                     },
                     caf::after(50ms) >>
                         [&] {
                           beat();
                           more = (reported.empty() || committed.empty()) &&
                                  std::chrono::steady_clock::now() < deadline;
                         });
  CHECK(reported == std::vector<std::uint32_t>{1});
  CHECK(committed == std::vector<std::uint32_t>{1});
  caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
}

TEST_CASE("a member's heartbeats for another node keep neither that node nor the member "
          "alive - it is declared lost as if silent",
          "[actors][net]") {
  joined_member m;
  const int member = m.join();
  const auto start = std::chrono::steady_clock::now();
  bool lost = false;
  // Beats every half period, each for node 7: none counts.
  while (!lost && std::chrono::steady_clock::now() - start < 3s) {
    m.send(schema::heartbeat{static_cast<std::uint32_t>(member + 7), 0, 0, 0, {}});
    lost = m.lost_within(m.policy.period / 2);
  }
  const auto after = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  INFO("declared lost after " << after.count() << " ms (timeout "
                              << m.policy.timeout().count() << " ms)");
  CHECK(lost);
  CHECK(after >= m.policy.timeout() - 50ms);
}
