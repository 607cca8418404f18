// bamboo-train (and a trainer's own binary, through bamboo::main): trains a
// GPT, a BERT or the trainer's model split into S pipeline stages, each a CAF
// actor, driven by the cluster manager. Reads like this:
//   1. parse the command line into a train_config,
//   2. run it in an embedded cluster (or, with --processes, a manager and one
//      worker process per stage), printing progress and metrics,
//   3. summarise: steps, preemptions survived, recomputed work, failover latency.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "actors/embedded_cluster.hpp"
#include "actors/net/auth.hpp"
#include "examples/cluster/child_process.hpp"
#include "examples/cluster/process.hpp"
#include "examples/programs/main.hpp"
#include "examples/train/cli.hpp"
#include "examples/train/local_cluster.hpp"
#include "examples/train/report.hpp"
#include "examples/train/token_file.hpp"
#include "examples/train/trace_replay.hpp"
#include "log/log.hpp"
#include "model/checkpoint_manifest.hpp"
#include "model/schedule.hpp"

namespace bamboo {

namespace {
// bamboo-train's own options with a value, which the manager does not take.
constexpr const char* launcher_options[] = {
    "--preempt",    "--restarts",      "--replace-after-s",    "--join",
    "--spot-trace", "--trace-speedup", "--max-workers",        "--notice-s",
    "--zones",      "--token-file",    "--operator-token-file"};
} // namespace

int train_main(int argc, char** argv, std::shared_ptr<const model_definition> model) {
  int exit_code = 0;
  auto opts = app::parse_cli(argc, argv, exit_code, model);
  if (!opts)
    return exit_code;
  log::set_level(opts->log_level);
  const auto& cfg = opts->cfg;
  if (opts->print_schedule) {
    std::printf("1F1B, S=%d, M=%d, redundancy %s (unit costs: F=1 B=2%s; '.' idle%s)\n%s",
                cfg.stages, cfg.micro_batches(), to_string(cfg.redundancy),
                cfg.redundancy == redundancy_mode::eager ? " R=1" : "",
                cfg.redundancy == redundancy_mode::eager
                    ? ", R = forward redundant computation for the successor"
                    : "",
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
      const std::string arg = argv[i];
      if (arg == "--processes")
        continue;
      bool launchers = false;
      for (const char* o : launcher_options) {
        if (arg == o)
          ++i; // and its value
        launchers = launchers || arg == o || arg.rfind(std::string(o) + "=", 0) == 0;
      }
      if (!launchers)
        args.push_back(arg);
    }
    app::local_cluster_options lc;
    if (!opts->spot_trace.empty()) {
      auto trace = sim::load_trace(opts->spot_trace);
      if (!trace) {
        std::cerr << "bamboo-train: error: --spot-trace: " << trace.error << "\n";
        return 2;
      }
      lc.trace = std::make_shared<app::trace_replay>(
          std::move(trace.events), opts->max_workers, opts->trace_speedup);
      const int initial = lc.trace->initial_workers();
      if (initial < cfg.stages) {
        std::cerr << "bamboo-train: error: --spot-trace: the trace starts with "
                  << initial << " instance(s) in " << opts->max_workers
                  << " worker slots, fewer than --stages " << cfg.stages << "\n";
        return 2;
      }
      args.insert(args.end(), {"--workers", std::to_string(initial)});
      lc.notice = std::chrono::milliseconds(static_cast<long>(opts->notice_s * 1000));
    }
    lc.manager_args = std::move(args);
    lc.token_file = opts->token_file;
    lc.operator_token_file = opts->operator_token_file;
    if (opts->tls.enabled())
      lc.worker_tls = {"--tls-cert",  opts->tls.cert, "--tls-key",
                       opts->tls.key, "--tls-ca",     opts->tls.ca};
    if (model) { // every process is this program, so that each builds the model
      lc.manager_program = {proc::program_path(), "manager"};
      lc.worker_program = {proc::program_path(), "worker"};
    }
    lc.workers = lc.trace            ? lc.trace->initial_workers()
                 : opts->workers > 0 ? opts->workers
                                     : cfg.coordinates();
    lc.global_batch = cfg.global_batch;
    for (const auto& j : opts->joins)
      lc.joins.push_back({j.step, j.count});
    lc.log_level = opts->log_level;
    lc.zones = opts->zones;
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
  // SIGTERM or SIGINT: the step in flight finishes, the boundary is
  // checkpointed; a second one ends the process at once.
  process::install_graceful_stop(app::remove_token_files_now);
  run_options run = opts->run;
  run.stop_signal = [] { return process::stop_signal(); };
  std::unique_ptr<app::token_file> token; // what bamboo-inspect proves
  if (run.inspect.enabled) {
    token = app::run_tokens(opts->token_file, opts->operator_token_file);
    if (!token)
      return 2;
    if (token->user_given())
      key_checkpoints(token->token());
    run.inspect.token = token->token();
    run.inspect.operator_token = token->operator_token();
    run.inspect.on_listening = [&](std::uint16_t port) {
      std::printf(
          "bamboo-train: watch this run with: bamboo-inspect "
          "--token-file %s 127.0.0.1:%u (steer it: add --operator-token-file %s)\n",
          token->path().c_str(), static_cast<unsigned>(port),
          token->operator_path().c_str());
      std::fflush(stdout);
    };
  } else if (!opts->token_file.empty() || std::getenv("BAMBOO_TOKEN")) {
    std::string error; // the user's token keys the checkpoints' manifests
    auto t = load_token(opts->token_file, error);
    if (!t) {
      std::fprintf(stderr, "bamboo-train: error: %s\n", error.c_str());
      return 2;
    }
    key_checkpoints(*t);
  }
  run.on_step = [&](const step_record& r) { report.on_step(r); };
  run.on_rollback = [&](std::int64_t to, const std::string& why) {
    report.on_rollback(to, why);
  };
  auto result = run_embedded(cfg, run);
  if (!result)
    return app::failure_status("bamboo-train", result.error());
  report.summary(*result);
  if (result->stopped_by != 0)
    return app::stopped_status("bamboo-train", *result, run.checkpoints.dir);
  return report.write_digests("bamboo-train", *result) && report.written() ? 0 : 1;
}

} // namespace bamboo
