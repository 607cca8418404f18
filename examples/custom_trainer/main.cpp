// A custom trainer linking the bamboo library with a model of its own (a
// convolutional image classifier, conv_classifier.hpp): it trains the model on
// one stage, then on three with a node preempted in the middle of a step, and
// checks that both runs have the same losses, bit for bit.
#include <cstdio>
#include <vector>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "conv_classifier.hpp"

namespace {

std::vector<double> train(int stages, std::vector<bamboo::preempt_spec> kills) {
  bamboo::train_config cfg;
  cfg.custom_model = std::make_shared<conv_example::conv_classifier>();
  cfg.stages = stages;
  cfg.global_batch = 32;
  cfg.micro_batch = 4;
  cfg.steps = 12;
  cfg.optim.lr = 3e-3;
  cfg.redundancy = bamboo::redundancy_mode::eager;

  bamboo::run_options opts;
  opts.preemptions = std::move(kills);
  opts.on_step = [stages](const bamboo::step_record& r) {
    std::printf("custom trainer, %d stage(s): step %lld loss %.4f%s%s\n", stages,
                static_cast<long long>(r.step), r.loss, r.event.empty() ? "" : "  ",
                r.event.c_str());
  };
  opts.on_failover = [](const bamboo::failover_record& f) {
    std::printf("custom trainer: node %d lost in step %lld, stage %d moved to node %d; "
                "%d forwards and %d backwards recomputed, %.3f s\n",
                f.node, static_cast<long long>(f.step), f.stage, f.heir,
                f.recomputed_forwards, f.recomputed_backwards, f.latency_s);
  };
  auto result = bamboo::run_embedded(cfg, opts);
  if (!result) {
    std::fprintf(stderr, "custom trainer: %s\n",
                 bamboo::describe(result.error()).c_str());
    return {};
  }
  std::vector<double> losses;
  for (const auto& s : result->steps)
    losses.push_back(s.loss);
  return losses;
}

} // namespace

int main() {
  const auto one = train(1, {});
  const auto three = train(3, {{1, 4, 3}}); // node 1, step 4, before instruction 3
  if (one.empty() || one != three) {
    std::fprintf(stderr, "custom trainer: the 3-stage run's losses differ\n");
    return 1;
  }
  std::printf("custom trainer: 1 and 3 stages (one preempted) give the same %zu losses, "
              "%.4f -> %.4f\n",
              one.size(), one.front(), one.back());
  return 0;
}
