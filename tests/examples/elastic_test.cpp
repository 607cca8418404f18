// Elastic clusters of real processes: standby workers (--workers N) and
// workers that join mid-run (--join step=K) are taken into the plan at a step
// boundary when a node runs two stages; the state moves from its holders
// through files, so the losses equal the embedded fault-free run's to the
// last bit, and the ledger proves every sample used once.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "actors/embedded_cluster.hpp"
#include "model/checkpoint.hpp"
#include "tests/run_command.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;
using namespace bamboo::test;

namespace {

// The index of the first row whose event starts with `prefix`, or -1.
long first_event(const metrics_rows& m, const std::string& prefix) {
  for (std::size_t i = 0; i < m.events.size(); ++i)
    if (m.events[i].rfind(prefix, 0) == 0)
      return static_cast<long>(i);
  return -1;
}

std::string verify_ledger(const std::string& ledger) {
  const auto verdict = run_command(std::string(BAMBOO_LEDGER_BIN) + " verify " + ledger);
  INFO(verdict.output);
  CHECK(verdict.status == 0);
  return verdict.output;
}

// A process run checked against the embedded fault-free run of `cfg`: losses
// and final state bit for bit (`same_stages` false when it ends on another
// depth, whose per-stage step counters have other names) and its ledger
// verified; its log, metrics and the ledger's verdict, for the test's own checks.
struct checked_run {
  std::string log, verdict;
  metrics_rows m;
};

checked_run run_checked(const train_config& cfg, const std::string& name,
                        std::vector<std::string> args, bool same_stages = true) {
  const auto expected = embedded_reference(cfg);
  scratch_dir work;
  const auto ledger = work.file("ledger.txt");
  args.insert(args.end(), {"--ledger", ledger});
  process_run run(cfg, name, std::move(args));
  run.finish();
  checked_run r;
  r.log = run.proc.log();
  INFO(r.log);
  r.m = read_metrics(run.metrics);
  check_losses(r.m, expected);
  check_state(run.digests, expected, true, same_stages);
  r.verdict = verify_ledger(ledger);
  return r;
}

} // namespace

TEST_CASE("a worker that joins mid-run (kill in step 3, --join step=6) is admitted at a "
          "step boundary and takes the second stage off the overloaded node, losses "
          "identical",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(101);
  // Long enough for the new worker to start on 2 busy cores (1-3.5 s here, tens
  // of steps) and still train a while under the new plan.
  cfg.steps = 300;
  const auto r =
      run_checked(cfg, "join", {"--preempt", "node=1@step=3", "--join", "step=6"});
  const auto& log = r.log;
  const auto& m = r.m;
  INFO(log);
  CHECK(log.find("1 new worker(s) start in step 6") != std::string::npos);
  CHECK(log.find("node 4 joined: standby (1 standby)") != std::string::npos);
  CHECK(log.find("1 preemption(s) survived") != std::string::npos);
  CHECK(log.find("summary: 1 new plan(s) at step boundaries") != std::string::npos);
  const long admitted = first_event(
      m, "re-planned: node 0 runs stages 0 1 and 1 standby node(s) can take one");
  REQUIRE(admitted >= 7); // not before the boundary after the worker started
  for (long k = 4; k < admitted; ++k)
    CHECK(m.events.at(static_cast<std::size_t>(k)) ==
          "degraded: stage 1 unprotected; node 0 runs stages 0 1");
  for (std::size_t k = static_cast<std::size_t>(admitted) + 1; k < m.events.size(); ++k)
    CHECK(m.events[k].empty());
  CHECK(r.verdict.find("300 steps stand, 0 rolled back") != std::string::npos);
  CHECK(r.verdict.find("stage owners 0 2 3 4, shadows 4 0 2 3") != std::string::npos);
}

TEST_CASE("standby workers (--workers 6, S=4) take over after two non-adjacent kills in "
          "successive steps, with losses identical and a ledger that verifies",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(102);
  cfg.steps = 14;
  const auto r = run_checked(
      cfg, "standby",
      {"--workers", "6", "--preempt", "node=1@step=3", "--preempt", "node=3@step=4"});
  const auto& m = r.m;
  INFO(r.log);
  CHECK(r.log.find("2 preemption(s) survived") != std::string::npos);
  // Each loss left a node with two stages, and a standby worker relieved it.
  CHECK(std::count_if(m.events.begin(), m.events.end(), [](const std::string& e) {
          return e.rfind("re-planned: node ", 0) == 0;
        }) >= 1);
  CHECK(m.events.back().empty()); // every stage protected at the end
  CHECK(r.verdict.find("14 steps stand, 0 rolled back") != std::string::npos);
  // The last plan runs on the survivors and both standby workers.
  CHECK(r.verdict.find("stage owners 0 2 4 5, shadows 5 0 2 4") != std::string::npos);
}

TEST_CASE("a standby worker killed with a plan member - as a re-plan onto it is decided "
          "- never leaves a plan with more stages than workers: the run goes on with "
          "losses identical and a ledger that verifies",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(103);
  cfg.steps = 12;
  // Node 4 joined last: the standby. Node 1's loss leaves node 0 with two
  // stages, so the boundary after step 3 re-plans onto node 4 unless its own
  // loss is known first; either way the run must go on.
  const auto r = run_checked(
      cfg, "standby_lost",
      {"--workers", "5", "--preempt", "node=1@step=3", "--preempt", "node=4@step=3"},
      /*same_stages=*/false);
  CHECK(r.log.find("(-") == std::string::npos); // never a negative standby count
  CHECK(r.verdict.find("12 steps stand") != std::string::npos);
}

TEST_CASE("with --min-stages 2 and no standby worker two non-adjacent kills re-partition "
          "the pipeline from 4 stages to 3 then 2, losses identical and a ledger that "
          "verifies",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(103);
  cfg.steps = 14;
  // A clip that bites in every step: the global norm must be the same to the
  // bit over 4, 3 and 2 stages (summed tensor by tensor in layer order).
  cfg.optim.clip_norm = 0.05;
  // Worker 3 runs the last stage of the 3-stage plan (on workers 0, 2, 3).
  const auto r = run_checked(
      cfg, "repartition",
      {"--min-stages", "2", "--preempt", "node=1@step=3", "--preempt", "node=3@step=7"},
      false);
  const auto& m = r.m;
  INFO(r.log);
  CHECK(r.log.find("2 preemption(s) survived") != std::string::npos);
  CHECK(r.log.find("summary: 2 new plan(s) at step boundaries") != std::string::npos);
  const long three =
      first_event(m, "re-planned: node 0 runs stages 0 1 and no node is "
                     "standby: the layers are re-partitioned into 3 stages");
  const long two = first_event(m, "re-planned: node 2 runs stages 1 2 and no node is "
                                  "standby: the layers are re-partitioned into 2 stages");
  CHECK(three == 4); // the boundary after the failover's step
  CHECK(two == 8);
  CHECK(m.events.back().empty()); // both stages protected at the end
  CHECK(r.verdict.find("14 steps stand, 0 rolled back") != std::string::npos);
  CHECK(r.verdict.find("stage owners 0 2, shadows 2 0") != std::string::npos);
}

TEST_CASE("a pipeline re-partitioned to 3 stages is deepened to 4 again when a worker "
          "joins, losses identical",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(104);
  cfg.steps = 300; // time for the new worker to start on 2 busy cores
  const auto r = run_checked(
      cfg, "deepen",
      {"--min-stages", "3", "--preempt", "node=1@step=3", "--join", "step=6"}, false);
  const auto& m = r.m;
  INFO(r.log);
  CHECK(r.log.find("summary: 2 new plan(s) at step boundaries") != std::string::npos);
  CHECK(first_event(m, "re-planned: node 0 runs stages 0 1 and no node is standby: the "
                       "layers are re-partitioned into 3 stages") == 4);
  CHECK(first_event(m, "re-planned: the pipeline has 3 of 4 stages and 1 standby "
                       "node(s) can deepen it") >= 7);
  CHECK(r.verdict.find("300 steps stand, 0 rolled back") != std::string::npos);
  CHECK(r.verdict.find("stage owners 0 2 3 4, shadows 4 0 2 3") != std::string::npos);
}

namespace {

// The embedded fault-free run with the same plan history as a run that went
// from one pipeline to `pipelines` at step `at`: one pipeline to step `at`
// (its checkpoint there), then `pipelines` from that checkpoint on.
reference pipelines_from(const train_config& cfg, long at, int pipelines) {
  scratch_dir ckpt;
  run_options o;
  o.checkpoints.dir = ckpt.path();
  o.checkpoints.every = static_cast<int>(at);
  auto first = run_embedded(cfg, o);
  REQUIRE(first);
  // Only the checkpoint of step `at` stays: the resume takes the newest.
  namespace fs = std::filesystem;
  for (const auto& e : fs::directory_iterator(ckpt.path()))
    if (e.path().filename() !=
            fs::path(checkpoint_step_dir(ckpt.path(), at)).filename() &&
        e.path().filename().string().rfind("step-", 0) == 0)
      fs::remove_all(e.path());
  auto second_cfg = cfg;
  second_cfg.pipelines = pipelines;
  run_options resume;
  resume.checkpoints.dir = ckpt.path();
  resume.checkpoints.resume = true;
  resume.collect_digests = true;
  auto second = run_embedded(second_cfg, resume);
  REQUIRE(second);
  reference out;
  for (long k = 0; k < at; ++k)
    out.losses.push_back(first->steps.at(static_cast<std::size_t>(k)).loss);
  for (const auto& s : second->steps)
    out.losses.push_back(s.loss);
  for (const auto& d : second->digests) {
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(d.digest));
    out.digests[d.name] = hex;
  }
  return out;
}

} // namespace

TEST_CASE("with --pipelines auto two kills are covered by standby workers - and four "
          "that join bring the cluster to 8 nodes and 2 pipelines at a step boundary - "
          "losses and state bit for bit those of the same plan history",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(105);
  cfg.steps = 300; // time for four new workers to start on 2 busy cores
  scratch_dir work;
  const auto ledger = work.file("ledger.txt");
  process_run run(cfg, "pipelines",
                  {"--workers", "6", "--pipelines", "auto", "--preempt", "node=1@step=3",
                   "--preempt", "node=3@step=4", "--join", "step=10,count=4", "--ledger",
                   ledger});
  run.finish();
  const auto log = run.proc.log();
  INFO(log);
  const auto m = read_metrics(run.metrics);
  CHECK(log.find("2 preemption(s) survived") != std::string::npos);
  const long widened =
      first_event(m, "re-planned: 4 standby node(s) can form 1 more pipeline(s): 1 -> 2");
  REQUIRE(widened >= 11); // not before the boundary after the workers started
  CHECK(log.find("a new plan from step " + std::to_string(widened) +
                 " on 8 workers, 2 pipeline(s) of 4 stages (0 standby)") !=
        std::string::npos);
  // One pipeline's losses up to there are the one-pipeline run's; from there on
  // within 1e-5 of them (another order of one sum), and bit for bit those of the
  // same plan history.
  const auto one = embedded_reference(cfg);
  REQUIRE(m.losses.size() == one.losses.size());
  for (long k = 0; k < static_cast<long>(m.losses.size()); ++k) {
    const auto i = static_cast<std::size_t>(k);
    if (k < widened)
      CHECK(m.losses[i] == one.losses[i]);
    else
      CHECK(std::abs(m.losses[i] - one.losses[i]) <= 1e-5 * std::abs(one.losses[i]));
  }
  const auto same_history = pipelines_from(cfg, widened, 2);
  check_losses(m, same_history);
  check_state(run.digests, same_history);
  const auto verdict = verify_ledger(ledger);
  CHECK(verdict.find("300 steps stand, 0 rolled back") != std::string::npos);
}
