// What redundancy costs and what failover takes, measured in one run (interleaved
// rounds, warm-up steps left out, medians with min and max):
//   throughput  fault-free throughput of lazy and eager over off;
//   checkpoint  what a background checkpoint every N steps (10: the goodput
//               benchmark's setting) costs a lazy run's step, two ways: the
//               throughput ratio (each round runs both, so the ratio is taken
//               per round, then its median: the machine's drift between
//               rounds cancels, its noise does not), and directly, the
//               snapshot's wall time plus the writers' CPU time per step over
//               the step time (the cost if no core were ever idle);
//   failover    failover latency, from the kill to the completion of the step
//               it hit, next to the fault-free step time of the same runs;
//   bubbles     eager / off throughput at S=2 (M=4 and 8) and S=4 (M=8) next to its bound
//               on this machine's cores: the idle core time of the off
//               schedule (cores x step time - the process's CPU time in the
//               step, measured) against the work eager adds (its CPU time
//               over off's): eager cannot beat max(T_off, CPU_eager / cores).
//               FRC runs only in idle core time; the share of FRC forwards
//               that found some is printed next to it.
// `--part` picks one (all four take 15-25 minutes on 2 cores).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <sys/resource.h>

#include "examples/cluster/parse_or_exit.hpp"

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "bench/bench_util.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"

namespace bamboo::bench::redundancy_bench {
namespace {

constexpr int warmup_steps = 2;

struct bench_options {
  std::string part = "all";
  int rounds = 5;
  int steps = 8;
  int checkpoint_every = 10;
  std::string profile_out; // throughput: the overheads appended to a sim profile
};

train_config bench_config(redundancy_mode mode, int steps) {
  train_config c;
  c.model.layers = 4;
  c.model.d_model = 256;
  c.model.heads = 8;
  c.model.seq_len = 128;
  c.stages = 2;
  c.micro_batch = 4;
  c.global_batch = 32;
  c.steps = steps;
  c.threads = 1;
  c.redundancy = mode;
  return c;
}

run_result run(const train_config& c, const run_options& o = {}) {
  auto r = run_embedded(c, o);
  if (!r) {
    std::fprintf(stderr, "bench: %s\n", describe(r.error()).c_str());
    std::exit(1);
  }
  return std::move(*r);
}

double median_step(const run_result& r) {
  std::vector<double> t;
  for (const auto& s : r.steps)
    if (s.step >= warmup_steps && s.event.empty())
      t.push_back(s.seconds);
  return median(t);
}

// "0.973  (goal >= 0.97, met)": every goal says whether this run met it.
std::string against(double ratio, double goal) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.3f  (goal >= %.2f, %s)", ratio, goal,
                ratio >= goal ? "met" : "MISSED");
  return buf;
}

std::string at_most(double share, double goal) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.4f  (goal <= %.2f, %s)", share, goal,
                share <= goal ? "met" : "MISSED");
  return buf;
}

void throughput(const bench_options& b) {
  std::vector<double> off, lazy, eager;
  for (int round = 0; round < b.rounds; ++round) {
    off.push_back(median_step(run(bench_config(redundancy_mode::off, b.steps))));
    lazy.push_back(median_step(run(bench_config(redundancy_mode::lazy, b.steps))));
    eager.push_back(median_step(run(bench_config(redundancy_mode::eager, b.steps))));
  }
  std::printf("fault-free step, off:   %s\n", bench::spread(off).c_str());
  std::printf("fault-free step, lazy:  %s\n", bench::spread(lazy).c_str());
  std::printf("fault-free step, eager: %s\n", bench::spread(eager).c_str());
  std::printf("throughput lazy / off:   %s\n",
              against(median(off) / median(lazy), 0.97).c_str());
  std::printf("throughput eager / off:  %s\n",
              against(median(off) / median(eager), 0.90).c_str());
  if (b.profile_out.empty())
    return;
  // Noise can make a mode look faster than off: its cost is then 0.
  auto cost = [&](const std::vector<double>& mode) {
    return std::max(0.0, median(mode) / median(off) - 1);
  };
  std::ofstream out(b.profile_out, std::ios::app);
  out << "# bamboo-bench-redundancy --part throughput: fault-free step over off's\n"
      << "lazy_overhead," << cost(lazy) << "\neager_overhead," << cost(eager) << "\n";
  std::printf("overheads appended to %s\n", b.profile_out.c_str());
}

bool checkpoint_cost(const bench_options& b) {
  std::string dir =
      (std::filesystem::temp_directory_path() / "bamboo_bench_XXXXXX").string();
  if (!mkdtemp(dir.data())) {
    std::perror("bench: mkdtemp");
    return false;
  }
  run_options ck;
  ck.checkpoints.dir = dir;
  ck.checkpoints.every = b.checkpoint_every;
  ck.checkpoints.keep = 1;
  std::vector<double> lazy, checkpointed, ratio, cpu_share, snapshot_share, cost;
  std::size_t written = 0;
  for (int round = 0; round < b.rounds; ++round) {
    // Alternate which goes first, so neither always runs on a warmer machine.
    const auto cfg = bench_config(redundancy_mode::lazy, b.steps);
    double plain = 0, with = 0;
    for (int i = 0; i < 2; ++i) {
      if ((i == 0) == (round % 2 == 0)) {
        plain = median_step(run(cfg));
      } else {
        const double cpu0 = checkpoint_cpu_seconds();
        const double snap0 = checkpoint_snapshot_seconds();
        auto r = run(cfg, ck);
        // Per step, over the step time: the writers' CPU, and the snapshots'
        // wall time (summed over the stages, as if one core ran them all).
        const double per_step = double(b.steps) * median_step(r);
        cpu_share.push_back((checkpoint_cpu_seconds() - cpu0) / per_step);
        snapshot_share.push_back((checkpoint_snapshot_seconds() - snap0) / per_step);
        cost.push_back(cpu_share.back() + snapshot_share.back());
        if (!r.checkpoint_failures.empty()) {
          std::fprintf(stderr, "bench: a checkpoint failed: %s\n",
                       r.checkpoint_failures.front().c_str());
          return false;
        }
        written += static_cast<std::size_t>(b.steps / b.checkpoint_every);
        with = median_step(r);
      }
    }
    lazy.push_back(plain);
    checkpointed.push_back(with);
    ratio.push_back(plain / with);
  }
  std::filesystem::remove_all(dir);
  std::printf("fault-free step, lazy:                          %s\n",
              bench::spread(lazy).c_str());
  std::printf("fault-free step, lazy, checkpoint every %d steps: %s (%zu checkpoints)\n",
              b.checkpoint_every, bench::spread(checkpointed).c_str(), written);
  std::printf("throughput lazy+checkpoints / lazy, per round:  %s\n",
              bench::spread(ratio, "").c_str());
  std::printf("throughput lazy+checkpoints / lazy:             %s\n",
              against(median(ratio), 0.98).c_str());
  // Measured directly, whatever the step time's noise did: the writers' own
  // CPU (hashing, copying to the page cache; at nice 10 they use idle time)
  // and the snapshots training waited for.
  std::printf("writer CPU per step / step time:                %s\n",
              bench::spread(cpu_share, "").c_str());
  std::printf("snapshot wall per step / step time:             %s\n",
              bench::spread(snapshot_share, "").c_str());
  std::printf("checkpoint cost on the step, direct:            %s\n",
              at_most(median(cost), 0.02).c_str());
  return true;
}

bool failover(const bench_options& b) {
  for (auto mode : {redundancy_mode::lazy, redundancy_mode::eager}) {
    auto cfg = bench_config(mode, b.steps);
    std::vector<double> detect, latency, step;
    for (int round = 0; round < b.rounds; ++round) {
      // Node 1 (the last stage) dies before its 4th instruction of step 4.
      run_options o;
      o.preemptions = {{1, 4, 4}};
      auto r = run(cfg, o);
      if (r.failovers.size() != 1) {
        std::fprintf(stderr, "bench: expected one failover\n");
        return false;
      }
      detect.push_back(r.failovers[0].detect_s);
      latency.push_back(r.failovers[0].latency_s);
      step.push_back(median_step(r));
    }
    const double l = median(latency), st = median(step);
    std::printf("failover (%s): kill -> detected %s\n", to_string(mode),
                bench::spread(detect).c_str());
    std::printf("failover (%s): kill -> step complete %s\n", to_string(mode),
                bench::spread(latency).c_str());
    std::printf("failover (%s): fault-free step %s; ratio %.2f step times\n",
                to_string(mode), bench::spread(step).c_str(), l / st);
  }
  return true;
}

// The process's CPU time (every thread: stages, shadows, the manager), seconds.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

struct step_costs {
  double wall = 0, cpu = 0; // medians per step, warm-up left out
  double frc_share = 0;     // eager: FRC forwards run / (S-1) x M, median per step
};

// One run's step times and the CPU time the process spent in each step (from
// one step's commit to the next's).
step_costs measure_steps(const train_config& c) {
  std::vector<double> wall, cpu, frc;
  double last = -1;
  run_options o;
  o.on_step = [&](const step_record& r) {
    const double now = process_cpu_seconds();
    if (r.step >= warmup_steps && last >= 0) {
      wall.push_back(r.seconds);
      cpu.push_back(now - last);
      double ran = 0; // the last stage runs none: its successor is stage 0
      for (const auto& w : r.work)
        ran += w.frc;
      frc.push_back(ran / ((c.stages - 1) * c.micro_batches()));
    }
    last = now;
  };
  run(c, o);
  return {median(wall), median(cpu), median(frc)};
}

void bubbles(const bench_options& b) {
  const double cores = std::thread::hardware_concurrency();
  // The goals of issue 16: within 5 points of the bound at M=8; and 0.9 wherever
  // the bound allows it, as at M=4, whose bubble is larger (1F1B's (S-1)/(M+S-1)).
  struct setup {
    int stages, micro_batches;
    bool gap_goal;
  };
  for (auto [stages, micro_batches, gap_goal] :
       {setup{2, 4, false}, setup{2, 8, true}, setup{4, 8, true}}) {
    std::vector<double> ratio, bound, gap, idle_share, added_share, frc_share;
    for (int round = 0; round < b.rounds; ++round) {
      auto off_cfg = bench_config(redundancy_mode::off, b.steps);
      off_cfg.stages = stages;
      off_cfg.global_batch = micro_batches * off_cfg.micro_batch;
      auto eager_cfg = off_cfg;
      eager_cfg.redundancy = redundancy_mode::eager;
      const auto off = measure_steps(off_cfg), eager = measure_steps(eager_cfg);
      ratio.push_back(off.wall / eager.wall);
      bound.push_back(std::min(1.0, cores * off.wall / eager.cpu));
      gap.push_back(bound.back() - ratio.back()); // both from this round's two runs
      idle_share.push_back((cores * off.wall - off.cpu) / (cores * off.wall));
      added_share.push_back((eager.cpu - off.cpu) / (cores * off.wall));
      frc_share.push_back(eager.frc_share);
    }
    std::printf("S=%d, M=%d, %.0f cores:\n", stages, micro_batches, cores);
    std::printf("  idle core time in off's step (share of cores x step): %s\n",
                bench::spread(idle_share, "").c_str());
    std::printf("  work eager adds (its CPU time - off's, same share):   %s\n",
                bench::spread(added_share, "").c_str());
    std::printf("  FRC forwards run in idle time (the rest dropped): %s\n",
                bench::spread(frc_share, "").c_str());
    std::printf("  throughput eager / off: %s\n", bench::spread(ratio, "").c_str());
    std::printf("  its bound min(1, cores x T_off / CPU_eager): %s\n",
                bench::spread(bound, "").c_str());
    std::printf("  bound - eager / off, per round: %s\n", bench::spread(gap, "").c_str());
    // The median of the rounds' gaps: a round's bound and ratio come from the
    // same two runs, so the machine's drift between rounds is not in it.
    const double g = median(gap);
    std::printf("  eager / off %.3f against bound %.3f: %.1f points below it, median of "
                "the rounds%s\n",
                median(ratio), median(bound), 100 * g,
                !gap_goal   ? ""
                : g <= 0.05 ? " (goal <= 5, met)"
                            : " (goal <= 5, MISSED)");
    if (median(bound) >= 0.9)
      std::printf("  eager / off where the bound allows 0.9: %.3f (goal >= 0.90, %s)\n",
                  median(ratio), median(ratio) >= 0.9 ? "met" : "MISSED");
  }
}

} // namespace

int bench_main(int argc, char** argv) {
  bench_options b;
  CLI::App app{"bamboo-bench-redundancy: what redundancy, checkpoints and failover cost"};
  app.add_option("--profile-out", b.profile_out,
                 "with the throughput part: append lazy_overhead and eager_overhead "
                 "to this bamboo-sim profile (one bamboo-bench-pipeline "
                 "--profile-out wrote)");
  app.add_option("--part", b.part, "throughput, checkpoint, failover, bubbles or all")
      ->check(CLI::IsMember({"throughput", "checkpoint", "failover", "bubbles", "all"}))
      ->capture_default_str();
  app.add_option("--rounds", b.rounds, "interleaved rounds per figure")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--steps", b.steps, "steps per run (the first 2 are warm-up)")
      ->check(CLI::Range(6, 10000))
      ->capture_default_str();
  app.add_option("--checkpoint-every", b.checkpoint_every,
                 "steps between checkpoints in the checkpoint part")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  if (auto status = process::parse_or_exit(app, argc, argv, "bamboo-bench-redundancy"))
    return *status;
  log::set_level("warn");
  const auto c = bench_config(redundancy_mode::lazy, b.steps);
  std::printf("model: gpt, %d blocks, d_model %d, seq %d; S=%d, G=%d m=%d; 1 thread per "
              "stage; %d rounds of %d steps\n",
              c.model.layers, c.model.d_model, c.model.seq_len, c.stages, c.global_batch,
              c.micro_batch, b.rounds, b.steps);
  std::fflush(stdout);
  const bool all = b.part == "all";
  if (all || b.part == "throughput")
    throughput(b);
  if ((all || b.part == "checkpoint") && !checkpoint_cost(b))
    return 1;
  if ((all || b.part == "failover") && !failover(b))
    return 1;
  if (all || b.part == "bubbles")
    bubbles(b);
  return 0;
}

} // namespace bamboo::bench::redundancy_bench
