#include <catch2/catch.hpp>

#include "actors/failover_accounting.hpp"
#include "actors/failure_detector.hpp"
#include "actors/planner.hpp"
#include "actors/preemption.hpp"
#include "actors/step_ledger.hpp"

using namespace bamboo;

TEST_CASE("the initial plan puts each stage's replica on its predecessor's node",
          "[actors]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  CHECK(p.owner == std::vector<int>{0, 1, 2, 3});
  CHECK(p.shadow == std::vector<int>{3, 0, 1, 2});
  auto off = cluster_plan::initial(4, redundancy_mode::off);
  CHECK(off.shadow == std::vector<int>{-1, -1, -1, -1});
}

TEST_CASE("a lost node's stage moves to its shadow and the generation goes up",
          "[actors]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  auto d = plan_failover(p, 2);
  REQUIRE(d.fatal.empty());
  CHECK(d.plan.generation == 2);
  CHECK(d.plan.owner == std::vector<int>{0, 1, 1, 3});
  CHECK(d.plan.shadow == std::vector<int>{3, 0, -1, -1}); // stage 3's replica died too
  REQUIRE(d.promoted.size() == 1);
  CHECK(d.promoted[0] == std::pair<int, int>{2, 1});
  CHECK(d.plan.stages_of(1) == std::vector<int>{1, 2});
}

TEST_CASE("losses shadows cannot cover are fatal, with the reason", "[actors]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  auto first = plan_failover(p, 2).plan;
  // Node 1 now runs stages 1 and 2.
  CHECK(plan_failover(first, 1).fatal.find("ran 2 stages") != std::string::npos);
  // Stage 3 lost its replica with node 2.
  CHECK(plan_failover(first, 3).fatal.find("neighbouring") != std::string::npos);
  // A non-neighbour is fine.
  CHECK(plan_failover(first, 0).fatal.empty());
  CHECK(plan_failover(first, 2).fatal.find("not a live node") != std::string::npos);
  auto off = cluster_plan::initial(3, redundancy_mode::off);
  CHECK(plan_failover(off, 1).fatal.find("redundancy off") != std::string::npos);
}

TEST_CASE("a resumed step re-sends exactly what each receiver is missing", "[actors]") {
  std::vector<stage_done> d(3);
  d[0].forwards = {0, 1, 2};
  d[0].backwards = {0};
  d[1].restarted = true; // the heir of stage 1 starts over
  d[2].forwards = {0, 1};
  d[2].backwards = {0, 1};
  auto o = plan_resume(d);
  CHECK(o[0].resend_activations == std::vector<int>{0, 1, 2});
  CHECK(o[2].resend_gradients == std::vector<int>{0, 1});
  CHECK(o[1].delivered_activations == std::vector<int>{0, 1});
  CHECK(o[1].delivered_gradients == std::vector<int>{0});
  CHECK(o[1].resend_activations.empty());
  // Survivors alone: only tensors lost in the aborted group go again.
  std::vector<stage_done> e(2);
  e[0].forwards = {0, 1};
  e[1].forwards = {0};
  e[1].backwards = {0};
  e[0].backwards = {};
  auto q = plan_resume(e);
  CHECK(q[0].resend_activations == std::vector<int>{1});
  CHECK(q[1].resend_gradients == std::vector<int>{0});
}

TEST_CASE("the step ledger sets the clip once all reported and waits for shadows",
          "[actors]") {
  step_ledger l;
  l.begin(7, 2, {true, false});
  schema::step_report a{0, 0, 1, 7, 0, 9.0}, b{1, 1, 1, 7, 2.5, 16.0};
  CHECK_FALSE(l.report(a));
  CHECK(l.report(b));
  CHECK(l.grad_norm() == 5.0);
  CHECK(l.loss_sum() == 2.5);
  l.commit(0);
  l.commit(1);
  CHECK_FALSE(l.complete()); // stage 0's shadow has not synced
  l.synced(0);
  CHECK(l.complete());
  l.owner_lost(0); // synced: its update survives in the replica
  CHECK(l.committed(0));
}

TEST_CASE("preemption options parse, and bad ones are named", "[actors]") {
  std::vector<preempt_spec> kills;
  double rate = 0;
  CHECK_FALSE(parse_preempt("node=2@step=10.op=3", kills, rate));
  CHECK_FALSE(parse_preempt("node=0@step=4", kills, rate));
  CHECK_FALSE(parse_preempt("rate=2.5", kills, rate));
  REQUIRE(kills.size() == 2);
  CHECK(kills[0].node == 2);
  CHECK(kills[0].step == 10);
  CHECK(kills[0].op == 3);
  CHECK(kills[1].op == 0);
  CHECK(rate == 2.5);
  auto bad = parse_preempt("node=x@step=1", kills, rate);
  REQUIRE(bad);
  CHECK(bad->find("node=x@step=1") != std::string::npos);
}

TEST_CASE("Poisson preemptions are seeded and near their rate", "[actors]") {
  auto a = poisson_kills(5.0, 10000, 4, 8, 1);
  auto b = poisson_kills(5.0, 10000, 4, 8, 1);
  REQUIRE(a.size() == b.size());
  CHECK(a.size() > 400);
  CHECK(a.size() < 600);
  for (auto& k : a) {
    CHECK(k.node < 4);
    CHECK(k.op <= 8);
  }
  CHECK(poisson_kills(5.0, 10000, 4, 8, 2).size() != a.size());
}

TEST_CASE("the injector fires each kill once, past-the-end at the update", "[actors]") {
  preemption_injector inj({{1, 3, 2}, {2, 3, 99}});
  CHECK_FALSE(inj.should_kill(1, 3, 1, 8));
  CHECK(inj.should_kill(1, 3, 2, 8));
  CHECK_FALSE(inj.should_kill(1, 3, 2, 8));
  CHECK_FALSE(inj.should_kill(2, 3, 7, 8));
  CHECK(inj.should_kill(2, 3, 8, 8));
  CHECK(inj.fired().size() == 2);
}

TEST_CASE("the heartbeat tracker names nodes silent for too long", "[actors]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  using ms = std::chrono::milliseconds;
  t.watch(0, t0);
  t.watch(1, t0);
  t.seen(0, t0 + ms(100));
  t.seen(0, t0 + ms(300));
  t.seen(1, t0 + ms(100));
  CHECK(t.expired(t0 + ms(450), ms(200)) == std::vector<int>{1});
  CHECK(t.max_gap(0) == ms(200));
  t.forget(1);
  CHECK(t.expired(t0 + ms(450), ms(200)).empty());
}

TEST_CASE("after a failover, unprotected stages get shadows on their predecessor's node",
          "[actors]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  auto d = plan_failover(p, 1); // node 0 now runs stages 0 and 1
  REQUIRE(d.fatal.empty());
  // Stage 1's predecessor runs on node 0 too: no point. Stage 2's replica died
  // with node 1: it goes to node 0, which runs stage 1.
  auto todo = plan_reshadow(d.plan);
  CHECK(todo == std::vector<std::pair<int, int>>{{2, 0}});
  d.plan.shadow[2] = 0;
  // Now node 2 may die too, in a later step: covered.
  CHECK(plan_failover(d.plan, 2).fatal.empty());
  CHECK(plan_reshadow(cluster_plan::initial(4, redundancy_mode::off)).empty());
}

TEST_CASE("a failover's recomputed work comes from the kill point, minus FRC, and is "
          "zero for a hand-off at a step boundary",
          "[actors]") {
  train_config cfg;
  cfg.stages = 4;
  cfg.micro_batch = 4;
  cfg.global_batch = 16; // M = 4
  cfg.redundancy = redundancy_mode::lazy;
  schema::step_report heir;
  heir.forwards = 4;
  heir.backwards = 4;
  failover_record f;
  f.stage = 1;
  f.step = 7;
  // Stage 1 of 4 runs F0 F1 F2 B0 F3 B1 B2 B3: killed before op 5, it had done
  // forwards 0-3 and backward 0.
  account_failover(f, heir, preempt_spec{1, 7, 5}, cfg);
  CHECK(f.recomputed_forwards == 4);
  CHECK(f.recomputed_backwards == 1);
  heir.inherited = 2; // two of those forwards came from FRC
  account_failover(f, heir, preempt_spec{1, 7, 5}, cfg);
  CHECK(f.recomputed_forwards == 2);
  // No known kill point (a real crash): the heir's work is the bound.
  account_failover(f, heir, std::nullopt, cfg);
  CHECK(f.recomputed_forwards == 4);
  CHECK(f.recomputed_backwards == 4);
  f.at_boundary = true;
  account_failover(f, heir, std::nullopt, cfg);
  CHECK(f.recomputed_forwards == 0);
  CHECK(f.recomputed_backwards == 0);

  failover_record crash, notice;
  crash.cause = "connection lost";
  notice.cause = "preemption notice";
  CHECK(failover_event({}) == "");
  CHECK(failover_event({crash}) == "failover");
  CHECK(failover_event({crash, notice}) == "preempted+failover");
  schema::step_report a, b;
  a.forwards = 2;
  a.inherited = 2;
  a.backwards = 4;
  b.forwards = 4;
  b.backwards = 4;
  CHECK(stage_work({a, b}) == " 4/4 4/4");
}
