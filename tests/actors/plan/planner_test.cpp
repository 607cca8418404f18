#include <catch2/catch.hpp>

#include <algorithm>

#include "actors/plan/planner.hpp"

using namespace bamboo;

TEST_CASE("the initial plan puts each stage's replica on its predecessor's node",
          "[actors][plan]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  CHECK(p.owner == std::vector<int>{0, 1, 2, 3});
  CHECK(p.shadow == std::vector<int>{3, 0, 1, 2});
  auto off = cluster_plan::initial(4, redundancy_mode::off);
  CHECK(off.shadow == std::vector<int>{-1, -1, -1, -1});
}

TEST_CASE("a lost node's stage moves to its shadow and the generation goes up",
          "[actors][plan]") {
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

TEST_CASE("losses shadows cannot cover are fatal, with the reason", "[actors][plan]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  auto first = plan_failover(p, 2).plan;
  // Node 1 now runs stages 1 and 2.
  CHECK(plan_failover(first, 1).fatal.find("it ran stages 1 and 2") != std::string::npos);
  // Stage 3 lost its replica with node 2.
  CHECK(plan_failover(first, 3).fatal.find("neighbouring") != std::string::npos);
  // A non-neighbour is fine.
  CHECK(plan_failover(first, 0).fatal.empty());
  CHECK(plan_failover(first, 2).fatal.find("not a live node") != std::string::npos);
  auto off = cluster_plan::initial(3, redundancy_mode::off);
  CHECK(plan_failover(off, 1).fatal.find("redundancy off") != std::string::npos);
  // One stage: nothing to fail over to, and no neighbour was lost.
  const auto single = plan_failover(cluster_plan::initial(1, redundancy_mode::lazy), 0);
  CHECK(single.fatal == "stage 0 lost: a pipeline of one stage has no shadow");
}

TEST_CASE("a resumed step re-sends exactly what each receiver is missing",
          "[actors][plan]") {
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

TEST_CASE("after a failover, unprotected stages get shadows on their predecessor's node",
          "[actors][plan]") {
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

TEST_CASE("a recovery round counts a survivor's own work, a restarted stage's "
          "inherited FRC, and a committed replica as done",
          "[actors][plan]") {
  const int m = 4;
  std::vector<std::optional<stage_progress>> progress(3);
  stage_progress p0;
  p0.stage = 0;
  p0.step = 5;
  p0.forwards = {0, 1, 2};
  p0.backwards = {0};
  p0.frc = {0, 1};
  progress[0] = p0;
  stage_progress p2;
  p2.stage = 2;
  p2.step = 4; // still in the step before: nothing of step 5
  p2.forwards = {0, 1, 2, 3};
  progress[2] = p2;
  auto done = work_done(progress, {1}, {false, false, false}, 5, m);
  CHECK(done[0].forwards == std::set<int>{0, 1, 2});
  CHECK(done[0].backwards == std::set<int>{0});
  CHECK_FALSE(done[0].restarted);
  CHECK(done[1].restarted);
  CHECK(done[1].forwards == std::set<int>{0, 1}); // from stage 0's FRC
  CHECK(done[1].backwards.empty());
  CHECK(done[2].forwards.empty());
  // The lost owner's update reached its replica: the stage is done.
  done = work_done(progress, {1}, {false, true, false}, 5, m);
  CHECK_FALSE(done[1].restarted);
  CHECK(done[1].forwards == std::set<int>{0, 1, 2, 3});
  CHECK(done[1].backwards == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("a standby node triggers a new plan when a node runs two stages or the "
          "pipeline is shallower than asked, and nothing else does",
          "[actors][plan]") {
  const depth_range four{4, 4};
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  CHECK(replan_reason(p, four, 2).empty()); // one stage a node: standby stays standby
  auto d = plan_failover(p, 1);
  REQUIRE(d.fatal.empty());
  CHECK(replan_reason(d.plan, four, 0).empty()); // nobody to take a stage
  CHECK(replan_reason(d.plan, four, 1) ==
        "node 0 runs stages 0 1 and 1 standby node(s) can take one");
  // Across processes nodes are named by their member numbers.
  CHECK(replan_reason(d.plan, four, 1, {7, 8, 9, 10}) ==
        "node 7 runs stages 0 1 and 1 standby node(s) can take one");
  auto shallow = cluster_plan::initial(2, redundancy_mode::off);
  CHECK(replan_reason(shallow, {2, 2}, 1).empty());
  CHECK(replan_reason(shallow, {2, 4}, 0).empty());
  CHECK(replan_reason(shallow, {2, 4}, 3) ==
        "the pipeline has 2 of 4 stages and 3 standby node(s) can deepen it");
}

TEST_CASE("with no standby node a node running two stages re-partitions the pipeline "
          "over the live nodes, never below the minimum depth",
          "[actors][plan]") {
  auto p = cluster_plan::initial(4, redundancy_mode::lazy);
  auto d = plan_failover(p, 1);
  REQUIRE(d.fatal.empty());
  CHECK(replan_reason(d.plan, {2, 4}, 0) ==
        "node 0 runs stages 0 1 and no node is standby: the layers are re-partitioned "
        "into 3 stages");
  CHECK(replan_reason(d.plan, {3, 4}, 0, {5, 6, 7, 8}) ==
        "node 5 runs stages 0 1 and no node is standby: the layers are re-partitioned "
        "into 3 stages");
  // A standby node relieves instead.
  CHECK(replan_reason(d.plan, {2, 4}, 1) ==
        "node 0 runs stages 0 1 and 1 standby node(s) can take one");
  // Two losses: 2 live nodes, and a minimum of 3 keeps the plan as it is.
  auto d2 = plan_failover(d.plan, 3);
  REQUIRE(d2.fatal.empty());
  CHECK(replan_reason(d2.plan, {3, 4}, 0).empty());
  CHECK(replan_reason(d2.plan, {2, 4}, 0).find("re-partitioned into 2 stages") !=
        std::string::npos);
  // The depth of a new plan: a stage a node, within the range.
  CHECK(plan_depth(3, {2, 4}) == 3);
  CHECK(plan_depth(6, {2, 4}) == 4);
  CHECK(plan_depth(1, {2, 4}) == 2);
  CHECK(resolve({0, 0}, 4).min == 4);
  CHECK(resolve({2, 0}, 4).max == 4);
}

TEST_CASE("the next plan's shape never has more places than live workers - whatever "
          "went between a re-plan's decision and its start",
          "[actors][plan]") {
  // The field's case: a re-plan of S=4 onto a standby worker decided on 5, and
  // 3 left when it starts (once "4 stages (-1 standby)", then an abort).
  const shape_rules fixed{1, 4, 4, {4, 4}, false};
  CHECK(next_plan_shape(fixed, 1, 5, true).stages == 4);
  const auto short_of = next_plan_shape(fixed, 1, 3, true);
  CHECK(short_of.pipelines == 1);
  CHECK(short_of.stages == 3); // the re-plan's state loads on any depth
  // Every rule, every count of workers, re-plan or rollback.
  for (int P : {1, 2, 3})
    for (int S : {2, 3, 4})
      for (int M : {4, 6, 12})
        for (bool automatic : {false, true})
          for (int lo = 1; lo <= S; ++lo)
            for (int hi = S; hi <= S + 2; ++hi) {
              if ((P > 1 || automatic) && (lo != S || hi != S))
                continue; // depth ranges re-partition one pipeline only
              if (M % P != 0)
                continue; // refused by the configuration's check
              const shape_rules r{P, S, M, {lo, hi}, automatic};
              for (int current = 1; current <= P + 1; ++current)
                for (int n = 1; n <= 14; ++n)
                  if (M % current == 0) // a running plan shares M equally
                    for (bool replan : {false, true}) {
                      const auto s = next_plan_shape(r, current, n, replan);
                      INFO("P=" << P << " S=" << S << " M=" << M << " auto=" << automatic
                                << " range " << lo << ".." << hi << " current " << current
                                << " workers " << n << (replan ? " re-plan" : " rollback")
                                << ": " << s.pipelines << " x " << s.stages);
                      CHECK(s.pipelines >= 1);
                      CHECK(s.stages >= 1);
                      CHECK(s.pipelines * s.stages <= n);
                      CHECK(s.stages <= std::max(S, hi));
                      if (s.pipelines > 1)
                        CHECK(M % s.pipelines == 0);
                    }
            }
}

TEST_CASE("depth ranges are checked against the run's depth and the model's layers",
          "[actors][plan]") {
  CHECK_FALSE(check_depths({}, 4, 6, 1));
  CHECK_FALSE(check_depths({2, 6}, 4, 6, 2));
  CHECK(*check_depths({3, 2}, 2, 6, 1) == "--min-stages 3 is above --max-stages 2");
  CHECK(*check_depths({1, 0}, 4, 6, 2) ==
        "--min-stages 1 is below 2 (the fewest stages this mode runs)");
  CHECK(*check_depths({0, 7}, 4, 6, 1) ==
        "--max-stages 7 is above the model's 6 layers (a stage holds one or more)");
  CHECK(*check_depths({5, 0}, 4, 6, 1) == "--min-stages 5 is above --max-stages 4");
  CHECK(*check_depths({2, 3}, 4, 6, 1) ==
        "--stages 4 is outside --min-stages 2 to --max-stages 3");
}

TEST_CASE("the zone ring puts each stage and its replica in different zones where the "
          "zones allow it, and keeps the join order otherwise",
          "[actors]") {
  using zones = std::vector<std::string>;
  // Two zones of two: a, b, a, b around the ring.
  const zones ab{"a", "a", "b", "b"};
  const auto ring = zone_ring(ab);
  CHECK(ring == std::vector<int>{0, 2, 1, 3});
  CHECK(same_zone_neighbours(ab, ring) == 0);
  // Losing zone a (nodes 0 and 1) is then covered: their stages' replicas are on
  // nodes of zone b.
  std::vector<int> nodes(ring.begin(), ring.end());
  auto plan = cluster_plan::assign(nodes, 1, 4, redundancy_mode::lazy);
  auto first = plan_failover(plan, 0);
  REQUIRE(first.fatal.empty());
  CHECK(plan_failover(first.plan, 1).fatal.empty());
  // Without the ring, nodes 0 and 1 are neighbours: fatal.
  auto plain = cluster_plan::assign({0, 1, 2, 3}, 1, 4, redundancy_mode::lazy);
  CHECK_FALSE(plan_failover(plan_failover(plain, 0).plan, 1).fatal.empty());

  // One zone, or an order already good: the join order stands.
  CHECK(zone_ring(zones(5, "default")) == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(zone_ring({"a", "b", "a", "b"}) == std::vector<int>{0, 1, 2, 3});
  CHECK(zone_ring({"x", "y", "z"}) == std::vector<int>{0, 1, 2});
  // Three zones, uneven: still no neighbours in one zone.
  const zones uneven{"a", "a", "a", "b", "b", "c"};
  CHECK(same_zone_neighbours(uneven, zone_ring(uneven)) == 0);
  // More than half in one zone: as few shared neighbours as the zones allow.
  const zones crowded{"a", "a", "a", "b"};
  CHECK(same_zone_neighbours(crowded, zone_ring(crowded)) == 2);
  CHECK(zone_ring({}).empty());
  CHECK(zone_ring({"a"}) == std::vector<int>{0});
}

TEST_CASE("with two pipelines a recovery round resends only inside each pipeline",
          "[actors][plan]") {
  // Coordinates p*2+s: pipeline 1's stage 1 (coordinate 3) restarted.
  std::vector<std::optional<stage_progress>> progress(4);
  for (int c : {0, 1, 2}) {
    stage_progress p;
    p.stage = c;
    p.step = 2;
    p.forwards = {0, 1};
    p.backwards = c % 2 == 1 ? std::vector<int>{0} : std::vector<int>{};
    progress[c] = p;
  }
  progress[2]->frc = {0};
  auto done = work_done(progress, {3}, {false, false, false, false}, 2, 2, 2);
  CHECK(done[3].restarted);
  CHECK(done[3].forwards == std::set<int>{0}); // from coordinate 2's FRC
  auto orders = plan_resume(done, 2);
  // Coordinate 1 (pipeline 0's last stage) sends nothing on to coordinate 2.
  CHECK(orders[1].resend_activations.empty());
  CHECK(orders[1].resend_gradients == std::vector<int>{0}); // to coordinate 0
  CHECK(orders[2].resend_gradients.empty()); // a first stage sends no gradients
  CHECK(orders[2].resend_activations == std::vector<int>{1}); // 0 was FRC'd
  CHECK(orders[3].delivered_gradients.empty());
}

TEST_CASE("after an interruption a stage's pipelines take the gradient sum from one "
          "that has it - sum again when none has - and say when it is lost",
          "[actors][plan]") {
  // Two pipelines of two stages: coordinates 0 1 | 2 3.
  auto with = [](std::vector<int> complete) {
    std::vector<std::optional<stage_progress>> progress(4);
    for (int c = 0; c < 4; ++c) {
      stage_progress p;
      p.stage = c;
      p.step = 6;
      p.complete = std::find(complete.begin(), complete.end(), c) != complete.end();
      progress[c] = p;
    }
    return progress;
  };
  // Stage 1: pipeline 0 has the sum, pipeline 1's owner restarted on its replica.
  auto sums = plan_sums(with({0, 1, 2}), {3}, {false, false, false, false}, 6, 2);
  REQUIRE(sums.size() == 2);
  CHECK(sums[0].source == -1); // stage 0: nobody needs it
  CHECK(sums[1].source == 0);
  CHECK(sums[1].targets == std::vector<int>{1});
  CHECK(sums[1].fatal.empty());
  // Nobody has stage 1's sum: it is made again.
  sums = plan_sums(with({0, 2}), {3}, {false, false, false, false}, 6, 2);
  CHECK(sums[1].source == -1);
  CHECK(sums[1].fatal.empty());
  // Pipeline 1 committed stage 1 and its node went; pipeline 0's owner was lost
  // before its commit: nobody holds pipeline 1's gradients nor the sum.
  sums = plan_sums(with({0, 2}), {1, 3}, {false, false, false, true}, 6, 2);
  CHECK(sums[1].fatal.find("stage 1's gradient sum of step 6 is lost") !=
        std::string::npos);
  // One pipeline: no sums at all.
  sums = plan_sums(with({}), {1}, {false, false, false, false}, 6, 1);
  for (const auto& s : sums)
    CHECK(s.source == -1);
}

TEST_CASE("with --pipelines auto standby nodes that can form a pipeline add one - and "
          "a node running two stages with none standby drops one",
          "[actors][plan]") {
  // One pipeline of 4 stages, 4 standby nodes, 4 micro-batches: a second fits.
  auto one = cluster_plan::assign({0, 1, 2, 3}, 1, 4, redundancy_mode::lazy);
  CHECK(pipeline_reason(one, 4, 4) ==
        "4 standby node(s) can form 1 more pipeline(s): 1 -> 2");
  CHECK(pipeline_reason(one, 3, 4).empty()); // not a whole pipeline
  CHECK(pipeline_reason(one, 4, 3).empty()); // 2 pipelines cannot share 3 micro-batches
  // Two pipelines; node 5 lost, node 4 runs stages 4 and 5; none standby.
  auto two = cluster_plan::assign({0, 1, 2, 3, 4, 5, 6, 7}, 2, 4, redundancy_mode::lazy);
  two = plan_failover(two, 5).plan;
  CHECK(pipeline_reason(two, 0, 4, {10, 11, 12, 13, 14, 15, 16, 17}) ==
        "node 14 runs stages 4 5 and no node is standby: 2 -> 1 pipeline(s) give every "
        "stage a node of its own");
  CHECK(fit_pipelines(7, 4, 4) == 1);
  CHECK(fit_pipelines(12, 4, 4) == 2); // 3 would not share 4 micro-batches
}

TEST_CASE("a plan's end is decided once for both modes: a re-plan goes on even under a "
          "stop signal, a loss shadows cannot cover rolls back only with checkpoints and "
          "no stop, everything else ends the run",
          "[plan]") {
  int cases = 0;
  for (int bits = 0; bits < 32; ++bits) {
    plan_outcome o;
    o.failed = bits & 1;
    o.unrecoverable = bits & 2;
    o.replanned = bits & 4;
    o.checkpoints = bits & 8;
    o.stopping = bits & 16;
    plan_end want = plan_end::finish;
    if (!o.failed && o.replanned)
      want = plan_end::replan;
    else if (o.failed && o.unrecoverable && o.checkpoints && !o.stopping)
      want = plan_end::roll_back;
    INFO("failed " << o.failed << " unrecoverable " << o.unrecoverable << " replanned "
                   << o.replanned << " checkpoints " << o.checkpoints << " stopping "
                   << o.stopping);
    CHECK(after_plan(o) == want);
    cases += after_plan(o) == plan_end::roll_back;
  }
  CHECK(cases == 2); // with and without a re-plan mark on the failed plan
}
