// Embedded mode: the manager and every stage as actors of one process, tensors
// handed over directly. The same actors and messages as a multi-process cluster.
#pragma once

#include <functional>

#include <caf/expected.hpp>

#include "actors/cluster_manager.hpp"
#include "model/config.hpp"

namespace bamboo {

struct run_options {
  bool collect_parameters = false;
  std::function<void(const step_record&)> on_step;
};

// Validates cfg, loads the data, partitions the model and trains cfg.steps steps.
// Errors: errc::invalid_config, errc::invalid_data (fix the input), or a
// failure of the run itself.
caf::expected<run_result> run_embedded(const train_config& cfg,
                                       const run_options& opts = {});

} // namespace bamboo
