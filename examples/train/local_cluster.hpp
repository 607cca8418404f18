// bamboo-train --processes: a local cluster of real processes on 127.0.0.1, a
// bamboo-manager (which trains and prints) and one bamboo-worker per stage, all
// started from the directory bamboo-train lives in, and all killed and reaped
// on exit or Ctrl-C. --preempt node=N@step=K becomes a real kill -9 of node N's
// process as step K begins.
#pragma once

#include <string>
#include <vector>

#include "actors/plan/preemption.hpp"

namespace bamboo::app {

// Runs the cluster with the manager getting `manager_args` (bamboo-train's own
// arguments, less --processes and --preempt) and returns its exit status.
int run_local_cluster(const std::vector<std::string>& manager_args, int stages,
                      const std::string& log_level,
                      const std::vector<preempt_spec>& kills);

} // namespace bamboo::app
