// The inspector's board as plain values: members' states follow the plan of
// the last committed step, events and losses are bounded and in order.
#include <catch2/catch.hpp>

#include "actors/actor_board.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/inspect_command.hpp"
#include "actors/run_controls.hpp"

using namespace bamboo;
using clock_type = inspect_board::clock;

namespace {

step_record step(std::int64_t k, std::vector<int> owners, std::vector<int> shadows,
                 std::uint64_t generation = 1) {
  step_record r;
  r.step = k;
  r.loss = 5.0 - 0.01 * static_cast<double>(k);
  r.samples_per_s = 100;
  r.generation = generation;
  r.owners = std::move(owners);
  r.shadows = std::move(shadows);
  return r;
}

} // namespace

TEST_CASE("the inspector's board says which member is active - a shadow - standby - "
          "degraded or lost - from the plan of the last committed step",
          "[net]") {
  const auto t0 = clock_type::now();
  inspect_board b{t0};
  b.set_run("gpt", 1, 3, 10);
  for (int n = 0; n < 5; ++n)
    b.on_join(n, n < 2 ? "a" : "b", t0);
  b.on_step(step(0, {0, 1, 2}, {2, 0, 1}));
  auto s = b.snapshot(7, {{0, 12}, {1, 30}}, t0 + std::chrono::seconds(2));
  CHECK(s.request == 7);
  CHECK(s.model == "gpt");
  CHECK(s.step == 0);
  CHECK(s.steps == 10);
  CHECK(s.stages == 3);
  CHECK(s.uptime_ms == 2000);
  CHECK(s.owners == std::vector<std::int32_t>{0, 1, 2});
  REQUIRE(s.nodes.size() == 5);
  CHECK(s.nodes[0].state == "active");
  CHECK(s.nodes[0].zone == "a");
  CHECK(s.nodes[0].heartbeat_age_ms == 12);
  CHECK(s.nodes[2].heartbeat_age_ms == -1); // not watched
  CHECK(s.nodes[3].state == "standby");

  failover_record f;
  f.node = 2;
  f.stage = 2;
  f.heir = 1;
  f.step = 1;
  f.latency_s = 0.25;
  f.recomputed_forwards = 3;
  b.on_gone(2, "lost", t0);
  b.on_gone(2, "left", t0); // the first word stands
  b.on_failover(f);
  b.on_step(step(1, {0, 1, 1}, {3, 0, -1}, 2));
  s = b.snapshot(8, {});
  CHECK(s.generation == 2);
  CHECK(s.nodes[1].state == "degraded");
  CHECK(s.nodes[2].state == "lost");
  CHECK(s.nodes[3].state == "shadow");
  CHECK(s.nodes[4].state == "standby");
  CHECK(s.losses == std::vector<double>{5.0, 4.99});
  REQUIRE(s.events.size() == 7);
  CHECK(s.events[5].text == "node 2 lost");
  CHECK(s.events[6].text.find("node 2 lost in step 1 (") == 0);
  CHECK(s.events[6].text.find("stage 2 moved to node 1, 0.250 s, 3 forwards") !=
        std::string::npos);

  // An operator drains node 3: draining until its stages moved (a notice's
  // failover: it left). Embedded runs have no gateway to see a node go: the
  // failover says it (node 0 killed).
  b.on_draining(3);
  CHECK(b.snapshot(9, {}).nodes[3].state == "draining");
  f.node = 3;
  f.cause = failover_cause::preemption_notice;
  b.on_failover(f);
  f.node = 0;
  f.cause = failover_cause::preempted;
  b.on_failover(f);
  s = b.snapshot(10, {});
  CHECK(s.nodes[3].state == "left");
  CHECK(s.nodes[0].state == "lost");
}

TEST_CASE("the inspector's board keeps the latest events and losses only", "[net]") {
  inspect_board b;
  b.set_run("bert", 1, 2, 1000);
  for (int k = 0; k < 300; ++k) {
    b.event("event " + std::to_string(k));
    b.on_step(step(k, {0, 1}, {1, 0}));
  }
  const auto s = b.snapshot(1, {});
  REQUIRE(s.events.size() == inspect_board::max_events);
  CHECK(s.events.front().text == "event 44");
  CHECK(s.events.back().text == "event 299");
  REQUIRE(s.losses.size() == inspect_board::max_losses);
  CHECK(s.losses.back() == Approx(5.0 - 2.99));
  CHECK(s.step == 299);
}

TEST_CASE("an operator's commands are checked before the manager acts - and each "
          "mistake gets a one-line answer",
          "[net]") {
  auto p = parse_command({"preempt", "2"});
  REQUIRE(p.command);
  CHECK(p.command->what == inspect_command::kind::preempt);
  CHECK(p.command->node == 2);
  p = parse_command({"notice", "3", "12.5"});
  REQUIRE(p.command);
  CHECK(p.command->what == inspect_command::kind::notice);
  CHECK(p.command->seconds == 12.5);
  CHECK(parse_command({"help"}).command);
  CHECK(parse_command({}).error == "no command (help lists them)");
  CHECK(parse_command({"reboot", "1"}).error ==
        "unknown command 'reboot' (help lists them)");
  CHECK(parse_command({"preempt"}).error == "usage: preempt NODE");
  CHECK(parse_command({"preempt", "1", "2"}).error == "usage: preempt NODE");
  CHECK(parse_command({"preempt", "-1"}).error == "preempt: '-1' is not a node number");
  CHECK(parse_command({"notice", "x"}).error == "notice: 'x' is not a node number");
  CHECK(parse_command({"notice", "1", "0"}).error ==
        "notice: '0' is not a number of seconds in (0, 3600]");
  CHECK(parse_command({"notice", "1", "nan"}).error.find("not a number of seconds") !=
        std::string::npos);
  CHECK(command_help().find("preempt NODE") != std::string::npos);
  p = parse_command({"redundancy", "eager"});
  REQUIRE(p.command);
  CHECK(p.command->what == inspect_command::kind::redundancy);
  CHECK(p.command->mode == redundancy_mode::eager);
  p = parse_command({"drain", "4"});
  REQUIRE(p.command);
  CHECK(p.command->what == inspect_command::kind::drain);
  CHECK(p.command->node == 4);
  for (const char* verb : {"checkpoint", "pause", "resume"}) {
    CHECK(parse_command({verb}).command);
    CHECK(parse_command({verb, "now"}).error ==
          std::string(verb) + " takes no arguments");
  }
  CHECK(parse_command({"redundancy", "full"}).error ==
        "redundancy: 'full' is not off, lazy or eager");
  CHECK(parse_command({"redundancy"}).error == "usage: redundancy off|lazy|eager");
  CHECK(parse_command({"drain"}).error == "usage: drain NODE");
  CHECK(parse_command({"help", "me"}).error == "help takes no arguments");
  for (const char* verb : {"drain", "checkpoint", "redundancy", "pause", "resume"})
    CHECK(command_help().find(verb) != std::string::npos);
}

TEST_CASE("an operator's pause - checkpoint - redundancy and orders reach the manager "
          "once - and a request that changes nothing says so",
          "[net]") {
  run_controls c;
  CHECK_FALSE(c.paused());
  CHECK(c.pause().ok);
  CHECK(c.paused());
  CHECK_FALSE(c.pause().ok);
  CHECK(c.resume().ok);
  CHECK_FALSE(c.resume().ok);
  CHECK_FALSE(c.paused());

  auto a = c.checkpoint();
  CHECK_FALSE(a.ok);
  CHECK(a.text.find("--checkpoint-dir") != std::string::npos);
  c.set_checkpoints(true);
  CHECK(c.checkpoint().ok);
  CHECK_FALSE(c.checkpoint().ok); // already asked for
  CHECK(c.take_checkpoint());
  CHECK_FALSE(c.take_checkpoint());

  c.set_redundancy(redundancy_mode::lazy);
  CHECK_FALSE(c.redundancy(redundancy_mode::lazy).ok);
  CHECK(c.redundancy(redundancy_mode::eager).ok);
  CHECK(c.wanted_redundancy() == redundancy_mode::eager);
  CHECK(c.redundancy() == redundancy_mode::lazy); // until the new plan runs
  CHECK(c.redundancy(redundancy_mode::lazy).text.find("withdrawn") != std::string::npos);
  CHECK(c.wanted_redundancy() == redundancy_mode::lazy);
  CHECK(c.redundancy(redundancy_mode::off).ok);
  c.set_redundancy(redundancy_mode::off); // the new plan
  CHECK(c.wanted_redundancy() == redundancy_mode::off);
  CHECK(c.redundancy() == redundancy_mode::off);

  c.set_live({0, 1, 3});
  CHECK(c.order(run_controls::node_action::preempt, 1, 0).ok);
  auto refused = c.order(run_controls::node_action::drain, 2, 0);
  CHECK_FALSE(refused.ok);
  CHECK(refused.text == "node 2 is not in the plan (the snapshot lists it)");
  CHECK(c.order(run_controls::node_action::notice, 3, 5).ok);
  auto orders = c.take_orders();
  REQUIRE(orders.size() == 2);
  CHECK(orders[0].node == 1);
  CHECK(orders[1].action == run_controls::node_action::notice);
  CHECK(orders[1].seconds == 5);
  CHECK(c.take_orders().empty());
}

TEST_CASE("the actor board lists each actor while it lives - with what it last said it "
          "was doing and how long ago",
          "[net]") {
  auto board = actor_board::make();
  const auto t0 = actor_board::clock::now();
  auto stage = board->enter("stage", 2, 2, "active", t0);
  {
    auto shadow = board->enter("shadow", 2, 3, "shadow", t0);
    auto manager = board->enter("manager", -1, -1, "running", t0);
    stage.set("active", "step 4 F1", 3, t0 + std::chrono::milliseconds(100));
    auto rows = board->rows(t0 + std::chrono::milliseconds(250));
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].kind == "manager"); // node -1 first
    CHECK(rows[1].kind == "stage");
    CHECK(rows[1].doing == "step 4 F1");
    CHECK(rows[1].mailbox == 3);
    CHECK(rows[1].age_ms == 150);
    CHECK(rows[2].kind == "shadow");
    CHECK(rows[2].doing == "starting");
    CHECK(rows[2].age_ms == 250);
    auto moved = std::move(shadow); // an entry moves with its actor's state
    CHECK(board->rows().size() == 3);
  }
  auto rows = board->rows();
  REQUIRE(rows.size() == 1); // the others left with their entries
  CHECK(actor_board::renumbered(rows, 7)[0].node == 7);
  std::vector<actor_board::entry> many;
  for (std::size_t i = 0; i < actor_board::max_rows + 5; ++i)
    many.push_back(board->enter("stage", 0, 0, "active"));
  CHECK(board->rows().size() == actor_board::max_rows);
  CHECK_FALSE(many.back()); // past the bound, an empty entry
}
