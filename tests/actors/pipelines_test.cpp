// Data-parallel pipelines in embedded mode: P pipelines of S stages share each
// step's micro-batches and sum every stage's gradients in a fixed order, so a
// P=2 run trains the P=1 run's model (up to the order of one sum), and
// failovers inside any pipeline, even between the sum and the update, change
// no bit of it.
#include <catch2/catch.hpp>

#include <cmath>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "model/schedule.hpp"
#include "tests/actors/embedded_runs.hpp"

using namespace bamboo;
using bamboo::test::run;
using bamboo::test::same_bits;

namespace {

train_config pipelines_config(int pipelines, redundancy_mode mode) {
  train_config c;
  c.model.layers = 2; // 4 pipeline layers
  c.model.d_model = 32;
  c.model.heads = 2;
  c.model.seq_len = 16;
  c.model.vocab = 64;
  c.model.dropout = 0.1;
  c.stages = 2;
  c.pipelines = pipelines;
  c.micro_batch = 2;
  c.global_batch = 16; // M = 8, 4 per pipeline with P = 2
  c.steps = 4;
  c.seed = 9;
  c.threads = 1;
  c.redundancy = mode;
  return c;
}

// The largest relative difference of the losses.
double loss_difference(const run_result& a, const run_result& b) {
  REQUIRE(a.steps.size() == b.steps.size());
  double worst = 0;
  for (std::size_t k = 0; k < a.steps.size(); ++k) {
    const double x = a.steps[k].loss, y = b.steps[k].loss;
    worst = std::max(worst, std::abs(x - y) / std::max(std::abs(x), std::abs(y)));
  }
  return worst;
}

// The largest absolute difference of the parameters (named alike in both).
double parameter_difference(const run_result& a, const run_result& b) {
  REQUIRE(a.parameters.size() == b.parameters.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    REQUIRE(a.parameters[i].name == b.parameters[i].name);
    const auto& x = a.parameters[i].values;
    const auto& y = b.parameters[i].values;
    REQUIRE(x.size() == y.size());
    for (std::size_t j = 0; j < x.size(); ++j)
      worst = std::max(worst, static_cast<double>(std::abs(x[j] - y[j])));
  }
  return worst;
}

} // namespace

TEST_CASE("two data-parallel pipelines train the one-pipeline model within 1e-5 and "
          "hold identical copies of it",
          "[actors]") {
  const auto one = run(pipelines_config(1, redundancy_mode::lazy));
  const auto two = run(pipelines_config(2, redundancy_mode::lazy));
  // The manager refuses to finish when the pipelines' copies differ, and keeps
  // one of each name: the same names as the one-pipeline run's.
  REQUIRE(two.parameters.size() == one.parameters.size());
  CHECK(loss_difference(one, two) < 1e-5);
  // The one sum's different rounding moves weights by ~1e-6 (measured 1.3e-6
  // after 4 steps); a wrong share of the micro-batches would move them by
  // steps of the learning rate (3e-3).
  const double moved = parameter_difference(one, two);
  INFO("largest parameter difference: " << moved);
  CHECK(moved < 1e-4);
  CHECK(two.steps.back().owners.size() == 4);
  CHECK(two.steps.back().shadows == std::vector<int>{1, 0, 3, 2});
}

TEST_CASE("failovers in either pipeline - mid-step and between the gradient sum and "
          "the update - change no bit of a two-pipeline run",
          "[actors]") {
  for (auto mode : {redundancy_mode::lazy, redundancy_mode::eager}) {
    const auto cfg = pipelines_config(2, mode);
    const auto ref = run(cfg);
    const int commit = static_cast<int>(
        make_schedule(1, cfg.stages, cfg.pipeline_micro_batches(), mode).size());
    // Node 3 runs pipeline 1's last stage: killed after its gradient sum, its
    // heir takes the sum from pipeline 0 instead of summing again.
    const std::vector<preempt_spec> kills{{1, 1, 3}, {3, 2, commit}};
    INFO("redundancy " << to_string(mode));
    auto got = run(cfg, kills);
    REQUIRE(got.failovers.size() == 2);
    CHECK(got.failovers[0].node == 1);
    CHECK(got.failovers[1].node == 3);
    CHECK(got.failovers[1].stage == 3); // pipeline 1, stage 1
    CHECK(same_bits(ref, got));
  }
}

TEST_CASE("losing the node that sums a stage while the other pipeline waits in the "
          "sum is made good by summing again",
          "[actors]") {
  auto cfg = pipelines_config(2, redundancy_mode::lazy);
  cfg.stages = 4;
  cfg.model.layers = 2;
  const auto ref = run(cfg);
  // Node 0 (pipeline 0, stage 0) sums stage 0 for both pipelines; killed at
  // its last instruction, the sum had not begun, and its heir makes it.
  const int last = static_cast<int>(
      make_schedule(0, cfg.stages, cfg.pipeline_micro_batches(), cfg.redundancy).size());
  auto got = run(cfg, {{0, 2, last - 1}, {6, 3, 2}});
  REQUIRE(got.failovers.size() == 2);
  CHECK(same_bits(ref, got));
}

TEST_CASE("pipelines that cannot share the micro-batches - or a kill of a node that "
          "does not exist - are refused by name",
          "[actors]") {
  auto cfg = pipelines_config(3, redundancy_mode::lazy);
  auto r = run_embedded(cfg, {});
  REQUIRE_FALSE(r);
  CHECK(describe(r.error()).find("3 pipelines cannot share equally") !=
        std::string::npos);
  cfg.pipelines = 2;
  run_options o;
  o.preemptions = {{4, 1, 0}};
  r = run_embedded(cfg, o);
  REQUIRE_FALSE(r);
  CHECK(describe(r.error()).find("there are 4 nodes (0..3)") != std::string::npos);
  o.preemptions.clear();
  o.depths = {1, 2};
  r = run_embedded(cfg, o);
  REQUIRE_FALSE(r);
  CHECK(is_error(r.error(), errc::invalid_config));
}
