// Embedded mode: the manager and every stage as actors of one process, tensors
// handed over directly. The same actors and messages as a multi-process cluster.
#pragma once

#include <functional>

#include <caf/expected.hpp>

#include "actors/cluster_manager.hpp"
#include "actors/failure_detector.hpp"
#include "actors/preemption.hpp"
#include "model/config.hpp"
#include "transport/transport_registry.hpp"

namespace bamboo {

struct run_options {
  bool collect_parameters = false; // owners' and shadows' state into the result
  std::function<void(const step_record&)> on_step;
  std::vector<preempt_spec> preemptions; // injected kills
  double preempt_rate = 0;               // plus seeded Poisson kills per 100 steps
  std::chrono::milliseconds heartbeat_period = default_heartbeat_period;
  int heartbeat_misses = default_heartbeat_misses;
  transport_kind transport = transport_kind::local; // gloo: real sockets on 127.0.0.1
};

// Validates cfg, loads the data, partitions the model and trains cfg.steps steps.
// Errors: errc::invalid_config, errc::invalid_data (fix the input),
// errc::unrecoverable_failure (a loss shadows cannot cover), or another failure.
caf::expected<run_result> run_embedded(const train_config& cfg,
                                       const run_options& opts = {});

} // namespace bamboo
