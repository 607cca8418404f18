#include <catch2/catch.hpp>

#include "actors/plan/failover_report.hpp"

using namespace bamboo;

TEST_CASE("a failover's recomputed work comes from the kill point, minus FRC, and is "
          "zero for a hand-off at a step boundary",
          "[actors][plan]") {
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

  failover_record crash, notice, killed, hang;
  crash.cause = failover_cause::connection_lost;
  notice.cause = failover_cause::preemption_notice;
  killed.cause = failover_cause::preempted;
  hang.cause = failover_cause::missed_heartbeats;
  CHECK(failover_event({}) == "");
  CHECK(failover_event({crash}) == "failover");
  CHECK(failover_event({hang}) == "failover");
  CHECK(failover_event({killed}) == "preempted+failover");
  CHECK(failover_event({crash, notice}) == "preempted+failover");
  schema::step_report a, b;
  a.forwards = 2;
  a.inherited = 2;
  a.backwards = 4;
  b.forwards = 4;
  b.backwards = 4;
  CHECK(stage_work({a, b}) == " 4/4 4/4");
}

TEST_CASE("failover causes read as words, and only kills and notices count as "
          "preemptions",
          "[actors][plan]") {
  CHECK(std::string(to_string(failover_cause::preempted)) == "preempted");
  CHECK(std::string(to_string(failover_cause::preemption_notice)) == "preemption notice");
  CHECK(std::string(to_string(failover_cause::actor_down)) == "actor down");
  CHECK(std::string(to_string(failover_cause::connection_lost)) == "connection lost");
  CHECK(std::string(to_string(failover_cause::missed_heartbeats)) == "missed heartbeats");
  CHECK(is_preemption(failover_cause::preempted));
  CHECK(is_preemption(failover_cause::preemption_notice));
  CHECK_FALSE(is_preemption(failover_cause::actor_down));
  CHECK_FALSE(is_preemption(failover_cause::connection_lost));
  CHECK_FALSE(is_preemption(failover_cause::missed_heartbeats));
  failover_record f;
  f.cause = failover_cause::connection_lost;
  CHECK(describe(f) == "connection lost");
  f.detail = "remote_link_unreachable";
  CHECK(describe(f) == "connection lost (remote_link_unreachable)");
}
