// A worker's agent against a stand-in manager (a scoped actor): the join by
// challenge-response, and frames it cannot use (random, truncated, oversized)
// answered with frame_rejected while the agent goes on.
#include <catch2/catch.hpp>

#include <caf/all.hpp>

#include <random>

#include "actors/auth.hpp"
#include "actors/errors.hpp"
#include "actors/frame_channel.hpp"
#include "actors/messages.hpp"
#include "actors/worker_agent.hpp"

using namespace bamboo;

namespace {

struct agent_fixture {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::unique_ptr<caf::scoped_actor> manager;
  caf::actor agent;

  agent_fixture() {
    register_errors(cfg);
    register_messages(cfg);
    register_frames(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
    manager = std::make_unique<caf::scoped_actor>(*sys);
    worker_spec ws;
    ws.gateway = *manager;
    ws.token = "s3cret";
    ws.frame_limit = 4096;
    agent = spawn_worker_agent(*sys, ws);
  }
  ~agent_fixture() { caf::anon_send_exit(agent, caf::exit_reason::user_shutdown); }

  // The next frame from the agent (heartbeats skipped), or nullopt after 5 s.
  std::optional<schema::frame> next() {
    std::optional<schema::frame> out;
    for (int i = 0; i < 50 && !out; ++i)
      (*manager)->receive(
          [&](const wire_frame& w) {
            auto d = schema::decode(w.bytes);
            REQUIRE(d);
            if (!std::holds_alternative<schema::heartbeat>(d.value))
              out = std::move(d.value);
          },
          caf::after(std::chrono::milliseconds(100)) >> [] {});
    return out;
  }
  void send(std::vector<std::uint8_t> bytes) {
    (*manager)->send(agent, wire_frame{std::move(bytes)});
  }
};

} // namespace

TEST_CASE("a worker agent rejects random, truncated and oversized frames and goes on",
          "[actors]") {
  agent_fixture f;
  auto first = f.next();
  REQUIRE(first);
  REQUIRE(std::holds_alternative<schema::challenge_request>(*first));

  std::mt19937 gen(5);
  auto random_bytes = [&](std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (auto& b : v)
      b = static_cast<std::uint8_t>(gen());
    return v;
  };
  const std::vector<std::uint8_t> nonce(32, 7);
  auto good = schema::encode(schema::join_challenge{nonce});
  auto truncated = good;
  truncated.resize(good.size() - 8);
  f.send(random_bytes(0));
  f.send(random_bytes(13));
  f.send(random_bytes(256));
  f.send(truncated);
  f.send(random_bytes(8192)); // over the agent's 4096-byte limit
  // Told once (not once per bad frame), so two peers never bounce rejections.
  auto rejected = f.next();
  REQUIRE(rejected);
  CHECK(std::holds_alternative<schema::frame_rejected>(*rejected));

  // Still alive and still joining: the real challenge gets the right proof.
  f.send(good);
  auto join = f.next();
  REQUIRE(join);
  REQUIRE(std::holds_alternative<schema::join_request>(*join));
  CHECK(check_proof("s3cret", nonce, std::get<schema::join_request>(*join).proof));
}

TEST_CASE("a worker agent whose join is refused ends with the reason", "[actors]") {
  agent_fixture f;
  REQUIRE(f.next());
  (*f.manager)->monitor(f.agent);
  (*f.manager)->send(f.agent, to_wire(schema::join_refused{"wrong cluster token"}));
  caf::error reason;
  (*f.manager)->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                        caf::after(std::chrono::seconds(5)) >> [] {});
  CHECK(describe(reason) == "invalid_config: refused: wrong cluster token");
}
