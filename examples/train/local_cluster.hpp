// bamboo-train --processes: a local cluster of real processes on 127.0.0.1, a
// bamboo-manager (which trains and prints) and one bamboo-worker per stage, all
// started from the directory bamboo-train lives in, and all killed and reaped
// on exit or Ctrl-C. --preempt node=N@step=K becomes a real kill -9 of node N's
// process as step K begins; --join step=K starts new workers then.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/plan/preemption.hpp"

namespace bamboo::app {

class trace_replay;

struct local_cluster_options {
  // bamboo-train's own arguments, less --processes, --preempt and --restarts.
  std::vector<std::string> manager_args;
  // The programs to start and their first arguments: empty, bamboo-manager and
  // bamboo-worker from bamboo-train's directory; a trainer's own binary starts
  // itself ({self, "manager"}, {self, "worker"}) so that every process builds
  // its model.
  std::vector<std::string> manager_program, worker_program;
  // The tokens' files (else $BAMBOO_TOKEN, $BAMBOO_OPERATOR_TOKEN, else fresh).
  std::string token_file, operator_token_file;
  // TLS files each worker is given (the manager has them among its arguments).
  std::vector<std::string> worker_tls;
  int workers = 2; // worker processes to start (--workers, default --stages)
  // New workers started as a step begins (the stand-in for new spot instances).
  struct join {
    long step = 0;
    int count = 1;
  };
  std::vector<join> joins;
  std::string log_level = "info";
  // Worker i (in launch order, which with zones is also join order: each starts
  // once the one before it joined) gets --zone zones[i mod size].
  std::vector<std::string> zones;
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
  // --spot-trace: workers started and removed as the trace says (null: none);
  // the run starts with its time-0 instances as `workers`.
  std::shared_ptr<trace_replay> trace;
  // A removed instance's worker gets SIGTERM (a preemption notice) and kill -9
  // this long after; 0: kill -9 at once.
  std::chrono::milliseconds notice{0};
  int global_batch = 0; // samples per step, for the replay's goodput
};

// Runs the cluster and returns the manager's exit status.
int run_local_cluster(const local_cluster_options& o);

} // namespace bamboo::app
