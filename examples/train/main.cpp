// bamboo-train: trains a GPT or BERT split into S pipeline stages, each a CAF
// actor, driven by the cluster manager. Reads like this:
//   1. parse the command line into a train_config,
//   2. run it in an embedded cluster, printing progress and writing metrics,
//   3. summarise: steps, preemptions survived, recomputed work, failover latency.
#include <cstdio>
#include <fstream>
#include <iostream>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "examples/train/cli.hpp"
#include "model/schedule.hpp"
#include "transport/log.hpp"

using namespace bamboo;

namespace {

void print_summary(const train_config& cfg, const run_result& r, double elapsed) {
  const auto& steps = r.steps;
  if (steps.empty())
    return;
  int fwd = 0, bwd = 0;
  std::string latencies;
  for (const auto& f : r.failovers) {
    fwd += f.recomputed_forwards;
    bwd += f.recomputed_backwards;
    char buf[96];
    std::snprintf(buf, sizeof(buf), "%s%.3f s (node %d, step %lld)",
                  latencies.empty() ? "" : ", ", f.latency_s, f.node,
                  static_cast<long long>(f.step));
    latencies += buf;
  }
  double mean_step = elapsed / steps.size();
  std::printf("summary: %zu steps, loss %.4f -> %.4f, %.1f samples/s overall\n",
              steps.size(), steps.front().loss, steps.back().loss,
              elapsed > 0 ? cfg.global_batch * steps.size() / elapsed : 0.0);
  std::printf("summary: redundancy %s, %zu preemptions survived, %d forwards + %d "
              "backwards recomputed (micro-batch passes), mean step %.3f s\n",
              to_string(cfg.redundancy), r.failovers.size(), fwd, bwd, mean_step);
  if (!r.failovers.empty())
    std::printf("summary: failover latency, kill to step completion: %s\n",
                latencies.c_str());
}

} // namespace

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

  std::ofstream metrics;
  if (!opts->metrics.empty()) {
    metrics.open(opts->metrics);
    if (!metrics) {
      std::cerr << "bamboo-train: error: cannot write metrics file '" << opts->metrics
                << "'\n";
      return 2;
    }
    metrics << "step,loss,samples_per_s,generation,lr,grad_norm,seconds,event\n";
  }

  double elapsed = 0;
  run_options run = opts->run;
  run.on_step = [&](const step_record& r) {
    elapsed += r.seconds;
    if (metrics.is_open()) {
      char line[256];
      std::snprintf(line, sizeof(line), "%lld,%.9g,%.3f,%llu,%.6g,%.6g,%.6f,%s\n",
                    static_cast<long long>(r.step), r.loss, r.samples_per_s,
                    static_cast<unsigned long long>(r.generation), r.lr, r.grad_norm,
                    r.seconds, r.event.c_str());
      metrics << line << std::flush;
    }
    if (!opts->quiet) {
      const double eta = elapsed / (r.step + 1) * (cfg.steps - r.step - 1);
      std::printf("step %lld/%d  loss %.4f  samples/s %.1f  eta %.1fs\n",
                  static_cast<long long>(r.step + 1), cfg.steps, r.loss, r.samples_per_s,
                  eta);
      std::fflush(stdout);
    }
  };

  auto result = run_embedded(cfg, run);
  if (!result) {
    const auto code = static_cast<errc>(result.error().code());
    const bool ours = result.error().category() == error_category;
    if (ours && code == errc::unrecoverable_failure) {
      std::cerr << "bamboo-train: fatal: " << describe(result.error()) << "\n";
      return 3;
    }
    const bool bad_input =
        ours && (code == errc::invalid_config || code == errc::invalid_data);
    std::cerr << "bamboo-train: error: " << describe(result.error()) << "\n";
    return bad_input ? 2 : 1;
  }
  print_summary(cfg, *result, elapsed);
  return 0;
}
