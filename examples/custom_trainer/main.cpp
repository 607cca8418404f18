// A custom trainer linking the bamboo library: a BERT in three pipeline stages,
// with its own stopping rule and reporting.
#include <cstdio>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"

int main() {
  bamboo::train_config cfg;
  cfg.model.kind = bamboo::model_kind::bert;
  cfg.model.layers = 4;
  cfg.stages = 3;
  cfg.global_batch = 8;
  cfg.micro_batch = 2;
  cfg.steps = 5;

  bamboo::run_options opts;
  opts.on_step = [](const bamboo::step_record& r) {
    std::printf("custom trainer: step %lld loss %.4f\n", static_cast<long long>(r.step),
                r.loss);
  };
  auto result = bamboo::run_embedded(cfg, opts);
  if (!result) {
    std::fprintf(stderr, "custom trainer: %s\n",
                 bamboo::describe(result.error()).c_str());
    return 1;
  }
  return result->steps.size() == static_cast<std::size_t>(cfg.steps) ? 0 : 1;
}
