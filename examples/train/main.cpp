// bamboo-train: trains a GPT or BERT split into S pipeline stages, each a CAF
// actor, driven by the cluster manager. Reads like this:
//   1. parse the command line into a train_config,
//   2. run it in an embedded cluster (or, with --processes, a bamboo-manager and
//      one bamboo-worker process per stage), printing progress and metrics,
//   3. summarise: steps, preemptions survived, recomputed work, failover latency.
#include <cstdio>
#include <cstring>
#include <iostream>

#include "actors/embedded_cluster.hpp"
#include "examples/train/cli.hpp"
#include "examples/train/local_cluster.hpp"
#include "examples/train/report.hpp"
#include "log/log.hpp"
#include "model/schedule.hpp"

using namespace bamboo;

int main(int argc, char** argv) {
  int exit_code = 0;
  auto opts = app::parse_cli(argc, argv, exit_code);
  if (!opts)
    return exit_code;
  log::set_level(opts->log_level);
  const auto& cfg = opts->cfg;
  if (opts->print_schedule) {
    std::printf("1F1B, S=%d, M=%d, redundancy %s (unit costs: F=1 R=1 B=2; '.' idle, "
                "R = forward redundant computation for the successor)\n%s",
                cfg.stages, cfg.micro_batches(), to_string(cfg.redundancy),
                timeline(cfg.stages, cfg.micro_batches(), cfg.redundancy).c_str());
    return 0;
  }

  if (opts->processes) {
    if (cfg.stages < 2) {
      std::cerr << "bamboo-train: error: --processes needs --stages 2 or more (one "
                   "worker process per stage)\n";
      return 2;
    }
    if (opts->run.preempt_rate > 0) {
      std::cerr << "bamboo-train: error: --preempt rate=R is for embedded runs; with "
                   "--processes give node=N@step=K\n";
      return 2;
    }
    // Ours, for the manager, less what the launcher itself does.
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--processes") == 0)
        continue;
      if (std::strcmp(argv[i], "--preempt") == 0) {
        ++i; // and its value
        continue;
      }
      if (std::strcmp(argv[i], "--restarts") == 0 ||
          std::strcmp(argv[i], "--replace-after-s") == 0) {
        ++i;
        continue;
      }
      if (std::strncmp(argv[i], "--preempt=", 10) == 0 ||
          std::strncmp(argv[i], "--restarts=", 11) == 0 ||
          std::strncmp(argv[i], "--replace-after-s=", 18) == 0)
        continue;
      args.emplace_back(argv[i]);
    }
    app::local_cluster_options lc;
    lc.manager_args = std::move(args);
    lc.stages = cfg.stages;
    lc.log_level = opts->log_level;
    lc.kills = opts->run.preemptions;
    lc.restarts = opts->restarts;
    lc.replace_after =
        std::chrono::milliseconds(static_cast<long>(opts->replace_after_s * 1000));
    lc.checkpoint_dir = opts->run.checkpoints.dir;
    lc.resume = opts->run.checkpoints.resume;
    return app::run_local_cluster(lc);
  }

  app::run_report report(*opts);
  if (!report.open("bamboo-train"))
    return 2;
  run_options run = opts->run;
  run.on_step = [&](const step_record& r) { report.on_step(r); };
  run.on_rollback = [&](std::int64_t to, const std::string& why) {
    report.on_rollback(to, why);
  };
  auto result = run_embedded(cfg, run);
  if (!result)
    return app::failure_status("bamboo-train", result.error());
  report.summary(*result);
  return report.write_digests("bamboo-train", *result) ? 0 : 1;
}
