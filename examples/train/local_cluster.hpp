// bamboo-train --processes: a local cluster of real processes on 127.0.0.1, a
// bamboo-manager (which trains and prints) and one bamboo-worker per stage, all
// started from the directory bamboo-train lives in, and all killed and reaped
// on exit or Ctrl-C. --preempt node=N@step=K becomes a real kill -9 of node N's
// process as step K begins.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "actors/plan/preemption.hpp"

namespace bamboo::app {

struct local_cluster_options {
  // bamboo-train's own arguments, less --processes, --preempt and --restarts.
  std::vector<std::string> manager_args;
  int stages = 2;
  std::string log_level = "info";
  std::vector<preempt_spec> kills;
  // A manager lost (killed, or ended by a signal) starts the cluster again, new
  // workers and all, from the newest checkpoint in checkpoint_dir (--resume),
  // up to `restarts` times.
  int restarts = 0;
  // Each kill of a worker is followed this long after by a new worker (the
  // stand-in for a replacement spot instance); negative: none.
  std::chrono::milliseconds replace_after{-1};
  std::string checkpoint_dir;
  bool resume = false; // the manager args have --resume already
};

// Runs the cluster and returns the manager's exit status.
int run_local_cluster(const local_cluster_options& o);

} // namespace bamboo::app
