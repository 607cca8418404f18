// A training cluster of real processes against peers that reach the manager's
// port: control input comes only from members, and only the messages a peer
// may send are taken from it. Training must go on as if nobody had called:
// the losses and the final state equal the embedded fault-free run's.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/frame_channel.hpp"
#include "actors/net/network.hpp"
#include "actors/protocol.hpp"

using namespace bamboo;
using namespace bamboo::test;

TEST_CASE("a peer that did not join sends leave, a negative-clip commit, attaches and "
          "ticks to a training cluster, and training goes on with the same losses",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(53);
  const auto expected = embedded_reference(cfg);
  process_run run(cfg, "hostile");
  const auto port = run.proc.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  run.wait_steps(2);

  caf::actor_system_config acfg;
  configure_network(acfg);
  caf::actor_system sys{acfg};
  auto gateway =
      sys.middleman().remote_actor("127.0.0.1", static_cast<std::uint16_t>(std::stoi(port)));
  REQUIRE(gateway);
  caf::scoped_actor self{sys};
  for (int i = 0; i < 50; ++i) {
    // What the manager's own actors send the gateway.
    self->send(*gateway, broadcast_atom::value, to_wire(schema::leave{"go away"}));
    caf::anon_send(*gateway, broadcast_atom::value,
                   to_wire(schema::generation_end{1, "a fake end"}));
    self->send(*gateway, attach_atom::value, i % cfg.stages);
    self->send(*gateway, tick_atom::value);
    // What only the manager sends workers, and what only members send.
    for (std::uint64_t k = 0; k < 16; ++k) {
      self->send(*gateway, to_wire(schema::commit{1, k, -1.0}, schema::target::stage));
      self->send(*gateway, to_wire(schema::leave{"go away"}, schema::target::stage));
    }
    self->send(*gateway, to_wire(schema::heartbeat{static_cast<std::uint32_t>(i % 4), 0, 0, 0}));
    self->send(*gateway, to_wire(schema::preemption_notice{1, 10}));
  }
  run.finish();
  const auto log = run.proc.log();
  CHECK(log.find("0 preemption(s) survived") != std::string::npos);
  CHECK(log.find("only this process sends it") != std::string::npos);
  auto m = read_metrics(run.metrics);
  check_losses(m, expected);
  check_state(run.digests, expected);
}
