// Mid-step failover: a node killed before any instruction of a step (or just
// before its optimizer update) is covered by its predecessor's shadow, and the
// run ends with the very bits of the fault-free run.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <thread>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "model/schedule.hpp"
#include "tests/actors/embedded_runs.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
using bamboo::test::run;
using bamboo::test::same_bits;

namespace {

train_config failover_config(redundancy_mode mode) {
  train_config c;
  c.model.layers = 2; // 4 pipeline layers: one per stage
  c.model.d_model = 32;
  c.model.heads = 2;
  c.model.seq_len = 16;
  c.model.vocab = 64;
  c.model.dropout = 0.1;
  c.stages = 4;
  c.micro_batch = 2;
  c.global_batch = 8; // M = 4
  c.steps = 3;
  c.seed = 5;
  c.threads = 1;
  c.optim.clip_norm = 0;
  c.redundancy = mode;
  return c;
}

void sweep(redundancy_mode mode) {
  const auto cfg = failover_config(mode);
  const int m = cfg.micro_batches();
  const auto ref = run(cfg);
  const std::int64_t k = 1;
  for (int node = 0; node < cfg.stages; ++node) {
    const int ops = static_cast<int>(make_schedule(node, cfg.stages, m, mode).size());
    for (int op = 0; op <= ops; ++op) { // op == ops: just before the update
      INFO("redundancy " << to_string(mode) << ", kill node " << node << " at step " << k
                         << " before instruction " << op << " of " << ops);
      auto got = run(cfg, {{node, k, op}});
      REQUIRE(got.failovers.size() == 1);
      CHECK(got.failovers[0].node == node);
      CHECK(same_bits(ref, got));
      const auto& step = got.steps.at(k);
      CHECK(step.event == "preempted+failover");
      CHECK(step.generation == 2);
      const int pred = (node + cfg.stages - 1) % cfg.stages;
      for (int s = 0; s < cfg.stages; ++s) {
        const auto& w = step.work.at(s);
        INFO("stage " << s);
        // Each micro-batch is computed exactly once per stage: survivors never
        // redo work, the heir computes only what FRC did not already do.
        CHECK(w.backwards == static_cast<unsigned>(m));
        CHECK(w.forwards + w.inherited == static_cast<unsigned>(m));
        if (s != node)
          CHECK(w.inherited == 0);
      }
      const auto& heir = step.work.at(node);
      if (mode == redundancy_mode::lazy)
        CHECK(heir.inherited == 0);
      else // every FRC the predecessor ran before the loss is a forward not redone
        CHECK(heir.inherited == step.work.at(pred).frc);
      // The summary never claims more recomputation than the heir did.
      const auto& f = got.failovers[0];
      CHECK(f.inherited == static_cast<int>(heir.inherited));
      CHECK(f.recomputed_forwards <= static_cast<int>(heir.forwards));
      CHECK(f.recomputed_backwards <= static_cast<int>(heir.backwards));
    }
  }
}

} // namespace

TEST_CASE("a node killed at any instruction in lazy mode changes no bit of the run",
          "[actors]") {
  sweep(redundancy_mode::lazy);
}

TEST_CASE("a node killed at any instruction in eager mode changes no bit of the run",
          "[actors]") {
  sweep(redundancy_mode::eager);
}

TEST_CASE("eager FRC spares the heir the forwards it already ran", "[actors]") {
  // Node 2 dies before its last backward: by then node 1 ran FRC for all of
  // stage 2's micro-batches but the last, so the heir recomputes few forwards.
  auto cfg = failover_config(redundancy_mode::eager);
  const int ops = static_cast<int>(make_schedule(2, 4, 4, cfg.redundancy).size());
  auto got = run(cfg, {{2, 1, ops - 1}});
  REQUIRE(got.failovers.size() == 1);
  const auto& heir = got.steps.at(1).work.at(2);
  CHECK(heir.inherited >= 1);
  CHECK(heir.forwards + heir.inherited == 4);
  CHECK(got.failovers[0].recomputed_backwards == 3);
}

TEST_CASE("shadows equal their owners bit for bit after each of steps 1 to 6, and "
          "after 20",
          "[actors]") {
  // A run of k steps ends with the state after step k: runs of 1..6 steps
  // check the shadows after every one of the first steps, and 20 a long run.
  for (int steps : {1, 2, 3, 4, 5, 6, 20}) {
    INFO(steps << " steps");
    auto cfg = failover_config(redundancy_mode::lazy);
    cfg.steps = steps;
    cfg.optim.clip_norm = 0.5; // the shadow must apply the same clipped update
    auto r = run(cfg);
    REQUIRE(r.shadow_state.size() == r.parameters.size());
    for (std::size_t i = 0; i < r.parameters.size(); ++i) {
      INFO(r.parameters[i].name);
      REQUIRE(r.shadow_state[i].name == r.parameters[i].name);
      const auto& a = r.parameters[i].values;
      const auto& b = r.shadow_state[i].values;
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
    }
    // The step counters are among the compared blobs: `steps` updates each.
    CHECK(r.parameters.back().name == "stage3#steps");
    CHECK(r.parameters.back().values[0] == static_cast<float>(steps));
  }
}

TEST_CASE("two non-neighbouring losses in one run are both covered", "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  auto ref = run(cfg);
  auto got = run(cfg, {{1, 0, 3}, {3, 2, 5}});
  CHECK(got.failovers.size() == 2);
  CHECK(same_bits(ref, got));
  // Node 0 runs stages 0 and 1 now, and stage 1's shadow could only be there.
  CHECK(got.steps.at(1).event == "degraded: stage 1 unprotected; node 0 runs stages 0 1");
  CHECK(got.steps.back().generation == 3);
}

TEST_CASE("two neighbours lost in one step are reported as unrecoverable", "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  run_options o;
  o.preemptions = {{1, 1, 0}, {2, 1, 2}};
  auto r = run_embedded(cfg, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == static_cast<std::uint8_t>(errc::unrecoverable_failure));
  CHECK(describe(r.error()).find("checkpoint") != std::string::npos);
}

TEST_CASE("with redundancy off a loss is unrecoverable", "[actors]") {
  auto cfg = failover_config(redundancy_mode::off);
  run_options o;
  o.preemptions = {{2, 1, 1}};
  auto r = run_embedded(cfg, o);
  REQUIRE_FALSE(r);
  CHECK(describe(r.error()).find("redundancy off") != std::string::npos);
}

TEST_CASE("heartbeats keep their period while a stage runs a long backward pass: "
          "no gap over the period + 200 ms, where a held-up detector would miss a "
          "whole pass",
          "[actors]") {
  train_config c;
  c.model.layers = 2;
  c.model.d_model = 384;
  c.model.heads = 4;
  c.model.seq_len = 256;
  c.stages = 2;
  c.micro_batch = 16; // a pass of ~0.37 s here: over the bound on a fast machine too
  c.global_batch = 32;
  c.steps = 2;
  c.threads = 1;
  run_options o;
  o.heartbeats.period = std::chrono::milliseconds(40);
  auto r = run_embedded(c, o);
  REQUIRE(r);
  double busy = 0;
  for (auto& s : r->steps)
    busy += s.seconds;
  INFO("training took " << busy << " s");
  // The bound: the period and a margin for a loaded machine (the detector
  // shares two cores with two busy stage threads). A detector that waited on a
  // stage's compute would go silent for a whole forward or backward pass: the
  // shortest step, two of each per stage, is over three times the bound.
  const double bound = 0.04 + 0.200;
  double shortest = 1e9;
  for (auto& s : r->steps)
    shortest = std::min(shortest, s.seconds);
  INFO("shortest step " << shortest << " s");
  REQUIRE(shortest > 3 * bound);
  for (std::size_t n = 0; n < r->heartbeats.size(); ++n) {
    INFO("node " << n << ": " << r->heartbeats[n] << " beats, max gap "
                 << r->heartbeat_max_gap_s[n] << " s");
    CHECK(r->heartbeats[n] + 1 >= static_cast<int>(busy / bound));
    CHECK(r->heartbeat_max_gap_s[n] < bound);
  }
}

TEST_CASE("over Gloo sockets a failover aborts the group and changes no bit",
          "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  auto ref = run(cfg);
  run_options o;
  o.collect_parameters = true;
  o.transport = transport_kind::gloo;
  o.preemptions = {{2, 1, 3}};
  auto r = run_embedded(cfg, o);
  REQUIRE(r);
  REQUIRE(r->failovers.size() == 1);
  CHECK(same_bits(ref, *r));
  // The group of generation 1 is aborted, not waited on: the step completes in
  // well under Gloo's own timeout.
  CHECK(r->failovers[0].latency_s < 5.0);
}

TEST_CASE("neighbours lost in different steps are covered by a new shadow", "[actors]") {
  for (auto mode : {redundancy_mode::lazy, redundancy_mode::eager}) {
    INFO(to_string(mode));
    auto cfg = failover_config(mode);
    cfg.steps = 5;
    auto ref = run(cfg);
    // Node 1 dies in step 1; stage 2 gets a new shadow on node 0 at the step
    // boundary; node 2 dies in step 3 and node 0 takes stage 2 over as well.
    auto got = run(cfg, {{1, 1, 2}, {2, 3, 4}});
    REQUIRE(got.failovers.size() == 2);
    CHECK(got.failovers[1].heir == 0);
    CHECK(same_bits(ref, got));
    // Every shadow still alive equals its owner bit for bit.
    REQUIRE_FALSE(got.shadow_state.empty());
    for (const auto& sh : got.shadow_state) {
      auto it = std::find_if(got.parameters.begin(), got.parameters.end(),
                             [&](const param_blob& b) { return b.name == sh.name; });
      REQUIRE(it != got.parameters.end());
      INFO(sh.name);
      CHECK(std::memcmp(it->values.data(), sh.values.data(), 4 * sh.values.size()) == 0);
    }
  }
}

TEST_CASE("with a minimum depth of 2 a node left running two stages re-partitions the "
          "layers over the live nodes (4 then 3 then 2 stages) and no bit changes",
          "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  cfg.steps = 6;
  auto ref = run(cfg);
  run_options o;
  o.collect_parameters = true;
  // Node 1 dies in step 1 (node 0 runs stages 0 1 to its end); node 3, the
  // last stage of the 3-stage plan, dies in step 3.
  o.preemptions = {{1, 1, 2}, {3, 3, 1}};
  o.depths.min = 2;
  auto got = run_embedded(cfg, o);
  REQUIRE(got);
  CHECK(got->replans == 2);
  CHECK(got->failovers.size() == 2);
  REQUIRE(got->steps.size() == ref.steps.size());
  for (std::size_t k = 0; k < ref.steps.size(); ++k) {
    INFO("step " << k);
    CHECK(got->steps[k].loss == ref.steps[k].loss);
  }
  CHECK(got->steps.at(2).event == "re-planned: node 0 runs stages 0 1 and no node is "
                                  "standby: the layers are re-partitioned into 3 stages");
  CHECK(got->steps.at(4).event == "re-planned: node 2 runs stages 1 2 and no node is "
                                  "standby: the layers are re-partitioned into 2 stages");
  CHECK(got->steps.back().event.empty()); // both stages protected again
  // The final state, by global layer name, is the 4-stage run's (the per-stage
  // step counters are named after stages, of which there are now 2).
  auto state = [](const run_result& r) {
    std::map<std::string, std::vector<float>> out;
    for (const auto& b : r.parameters)
      if (b.name.find("#steps") == std::string::npos)
        out[b.name] = b.values;
    return out;
  };
  CHECK(state(*got) == state(ref));
}

TEST_CASE("a depth range that cannot hold the run is refused by name", "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  auto refused = [&](int min, int max) {
    run_options o;
    o.depths = {min, max};
    auto r = run_embedded(cfg, o);
    REQUIRE_FALSE(r);
    CHECK(r.error().code() == static_cast<std::uint8_t>(errc::invalid_config));
    return describe(r.error());
  };
  CHECK_THAT(refused(3, 2), Catch::Contains("--min-stages 3 is above --max-stages 2"));
  CHECK_THAT(refused(0, 5),
             Catch::Contains("--max-stages 5 is above the model's 4 layers"));
  CHECK_THAT(refused(2, 3), Catch::Contains("--stages 4 is outside --min-stages 2 to "
                                            "--max-stages 3"));
}

TEST_CASE("in embedded mode a killed node's replacement joins at a step boundary and "
          "takes the second stage off the overloaded node - losses and state bit for bit",
          "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  cfg.steps = 12;
  const auto ref = run(cfg);
  run_options o;
  o.collect_parameters = true;
  o.preemptions = {{1, 3, 2}};
  o.replace_after = std::chrono::milliseconds(50);
  // Steps take milliseconds here: step 4 waits until the replacement is surely
  // ready (the runner looks every heartbeat period).
  o.on_step = [](const step_record& s) {
    if (s.step == 4)
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
  };
  std::vector<std::int64_t> replans;
  o.on_replan = [&](std::int64_t step, const std::string&) { replans.push_back(step); };
  auto r = run_embedded(cfg, o);
  REQUIRE(r);
  REQUIRE(r->failovers.size() == 1);
  REQUIRE(replans.size() == 1);
  CHECK(replans[0] >= 5);
  CHECK(replans[0] <= 7);
  const auto& last = r->steps.back();
  INFO("owners at the end: " << last.owners[0] << " " << last.owners[1] << " "
                             << last.owners[2] << " " << last.owners[3]);
  CHECK(last.owners == std::vector<int>{0, 2, 3, 4}); // node 4 is the replacement
  CHECK(same_bits(ref, *r));
}

TEST_CASE("embedded Poisson preemptions at 20 per 100 steps with checkpoints and "
          "replacements run to the end with the fault-free losses",
          "[actors]") {
  auto cfg = failover_config(redundancy_mode::lazy);
  cfg.steps = 60;
  const auto ref = run(cfg);
  const test::scratch_dir dir;
  run_options o;
  o.collect_parameters = true;
  o.preempt_rate = 20;
  o.checkpoints.dir = dir.path();
  o.checkpoints.every = 5;
  o.replace_after = std::chrono::milliseconds(0);
  // Steps of ~1 ms: each gives the runner a look at the ready replacements.
  o.on_step = [](const step_record&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  };
  auto r = run_embedded(cfg, o);
  REQUIRE(r);
  INFO(r->failovers.size() << " failovers, " << r->rollbacks << " rollbacks, "
                           << r->rollback_losses << " nodes lost to rollbacks, "
                           << r->replans << " re-plans");
  CHECK(r->failovers.size() + r->rollback_losses >= 6);
  CHECK(same_bits(ref, *r));
}
