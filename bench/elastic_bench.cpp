// Elastic clusters across real processes, measured in one invocation:
//   replan   the re-plan latency: a worker joins (--join) while a node runs two
//            stages; from the join to the first step committed under the new
//            plan, split into the wait for the next step boundary and the
//            re-plan itself (every stage saves its state, the new plan starts
//            and each worker loads its stage), over several rounds;
//   repartition  the cost of a re-partition: with --min-stages 2 and no standby
//            worker, a kill leaves a node running two stages and the next step
//            boundary splits the layers over the 3 workers left; from that
//            decision to the first step committed under the new plan, and the
//            step interval before (4 stages) and after (3 stages);
//   trace    goodput through the first hours of a spot trace (by default the
//            AWS p3 trace's first 2 h) replayed on at most 8 workers, for lazy
//            and eager redundancy: committed samples per second of wall time
//            over the fault-free run's, measured in the same invocation. The
//            trace's time is sped up to span the fault-free run's duration.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "examples/cluster/parse_or_exit.hpp"

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"

namespace bamboo::bench::elastic_bench {
namespace {

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct bench_options {
  std::string part = "all";
  int rounds = 3;
  std::string trace = BAMBOO_TRACES_DIR "/aws-p3-trace.csv";
  double hours = 2;
  int steps = 600;
  int max_workers = 8;
};

// The model every run trains: GPT, S=4, small enough for 2 cores.
std::vector<std::string> train_args(int steps, const std::string& redundancy) {
  return {BAMBOO_TRAIN_BIN, "--processes",
          "--stages",       "4",
          "--layers",       "4",
          "--d-model",      "64",
          "--heads",        "4",
          "--seq-len",      "32",
          "--micro-batch",  "2",
          "--global-batch", "8",
          "--steps",        std::to_string(steps),
          "--threads",      "1",
          "--redundancy",   redundancy};
}

struct scratch {
  std::string dir;
  scratch() {
    dir =
        (std::filesystem::temp_directory_path() / "bamboo_bench_elastic_XXXXXX").string();
    if (!mkdtemp(dir.data()))
      throw std::runtime_error("mkdtemp");
  }
  ~scratch() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

using timed_lines = std::vector<std::pair<clock_type::time_point, std::string>>;

// The time of the first line after `t`, or nullopt.
std::optional<clock_type::time_point> first_after(const timed_lines& lines,
                                                  clock_type::time_point t) {
  for (const auto& [when, text] : lines)
    if (when > t)
      return when;
  return std::nullopt;
}

// Median interval between consecutive lines within (from, to).
double median_interval(const timed_lines& lines, clock_type::time_point from,
                       clock_type::time_point to) {
  std::vector<double> gaps;
  std::optional<clock_type::time_point> prev;
  for (const auto& [when, text] : lines) {
    if (when <= from || when >= to)
      continue;
    if (prev)
      gaps.push_back(seconds(*prev, when));
    prev = when;
  }
  return median(gaps);
}

// When the run decided on a new plan and when its first step under that plan
// committed; nullopt (said, under `part`) when it never re-planned.
struct plan_change {
  clock_type::time_point decided, first_step;
};
std::optional<plan_change> new_plan(watched_child& child, const timed_lines& steps,
                                    const char* part) {
  const auto decided = child.matches(std::regex(R"(a new plan before step)"));
  const auto plan = child.matches(std::regex(R"(^a new plan from step (\d+))"));
  if (decided.empty() || plan.empty()) {
    std::printf("%s: no new plan\n", part);
    return std::nullopt;
  }
  auto first = first_after(steps, plan.front().first);
  if (!first) {
    std::printf("%s: no step after the new plan\n", part);
    return std::nullopt;
  }
  return plan_change{decided.front().first, *first};
}

bool repartition_cost(const bench_options& b) {
  std::vector<double> cost, before, after;
  for (int round = 0; round < b.rounds; ++round) {
    auto args = train_args(150, "lazy");
    args.insert(args.end(), {"--min-stages", "2", "--preempt", "node=1@step=60"});
    watched_child child(args);
    if (child.wait_exit(std::chrono::seconds(300)) != 0) {
      std::printf("repartition: the run failed\n");
      return false;
    }
    const auto steps = child.matches(std::regex(R"(^step \d+ \()"));
    const auto change = new_plan(child, steps, "repartition");
    if (!change)
      return false;
    cost.push_back(seconds(change->decided, change->first_step));
    before.push_back(median_interval(steps, steps.front().first, change->decided));
    after.push_back(median_interval(steps, change->first_step,
                                    steps.back().first + std::chrono::seconds(1)));
  }
  std::printf("re-partition 4 -> 3 stages, the decision to the first step committed "
              "under the new plan: %s\n",
              spread(cost).c_str());
  std::printf("  step interval before (4 stages on 4 workers): %s\n",
              spread(before).c_str());
  std::printf("  step interval after (3 stages on 3 workers):  %s\n",
              spread(after).c_str());
  return true;
}

bool replan_latency(const bench_options& b) {
  std::vector<double> total, boundary, replan;
  for (int round = 0; round < b.rounds; ++round) {
    auto args = train_args(150, "lazy");
    args.insert(args.end(), {"--preempt", "node=1@step=3", "--join", "step=6"});
    watched_child child(args);
    if (child.wait_exit(std::chrono::seconds(300)) != 0) {
      std::printf("replan: the run failed\n");
      return false;
    }
    const auto joined = child.matches(std::regex(R"(node 4 joined: standby)"));
    const auto steps = child.matches(std::regex(R"(^step \d+ \()"));
    if (joined.empty()) {
      std::printf("replan: the joined worker never joined\n");
      return false;
    }
    const auto change = new_plan(child, steps, "replan");
    if (!change)
      return false;
    total.push_back(seconds(joined.front().first, change->first_step));
    boundary.push_back(seconds(joined.front().first, change->decided));
    replan.push_back(seconds(change->decided, change->first_step));
  }
  std::printf(
      "re-plan latency, a worker's join to the first step committed under the new "
      "plan: %s\n",
      spread(total).c_str());
  std::printf("  of which waiting for the step boundary: %s\n", spread(boundary).c_str());
  std::printf("  of which the re-plan (state saved, new plan, stages loaded, first "
              "step): %s\n",
              spread(replan).c_str());
  return true;
}

// The trace's first `hours`, as a file of its own.
std::string cut_trace(const bench_options& b, const std::string& dir) {
  std::ifstream in(b.trace);
  const std::string out_path = dir + "/trace.csv";
  std::ofstream out(out_path);
  const long long limit = static_cast<long long>(b.hours * 3600e3);
  std::string line;
  while (std::getline(in, line)) {
    const auto cells = csv_cells(line);
    if (cells.size() == 3 && std::stoll(cells[0]) < limit)
      out << line << "\n";
  }
  return out_path;
}

struct replay_outcome {
  bool ok = false;
  double wall = 0, goodput = 0;
  double training = 0; // from the first step to the end: what the trace spans
  int kills = 0, added = 0, rollbacks = 0, replans = 0;
  std::string launcher; // bamboo-train's own goodput line
};

replay_outcome run_replay(const bench_options& b, const std::string& redundancy,
                          const std::string& trace, double speedup,
                          const std::string& dir) {
  auto args = train_args(b.steps, redundancy);
  const auto ckpt = dir + "/ckpt_" + redundancy;
  args.insert(args.end(), {"--log-level", "warn", "--checkpoint-dir", ckpt,
                           "--checkpoint-every", "20", "--keep", "2"});
  if (!trace.empty())
    args.insert(args.end(),
                {"--spot-trace", trace, "--trace-speedup", std::to_string(speedup),
                 "--max-workers", std::to_string(b.max_workers)});
  watched_child child(args);
  replay_outcome o;
  const int status = child.wait_exit(std::chrono::seconds(1200));
  const auto end = clock_type::now();
  const auto started = child.matches(std::regex(R"(^step 0 \()"));
  const auto listening =
      child.matches(std::regex(R"(bamboo-manager \(pid \d+\) listens)"));
  if (status != 0 || listening.empty() || started.empty()) {
    std::printf("  %s: the run failed (status %d)\n", redundancy.c_str(), status);
    for (const auto& [t, text] : child.matches(std::regex("error|fatal")))
      std::printf("    %s", text.c_str());
    return o;
  }
  o.wall = seconds(listening.front().first, end);
  o.training = seconds(started.front().first, end);
  o.goodput = static_cast<double>(b.steps) * 8 / o.wall;
  o.kills =
      static_cast<int>(child.matches(std::regex(R"(removed, (kill -9|SIGTERM))")).size());
  o.added = static_cast<int>(child.matches(std::regex(R"(added, a new worker)")).size());
  o.rollbacks = static_cast<int>(child.matches(std::regex("^rolled back to")).size());
  o.replans = static_cast<int>(child.matches(std::regex("^a new plan from step")).size());
  const auto line = child.matches(std::regex(R"(bamboo-train: (trace replay|goodput))"));
  if (!line.empty())
    o.launcher = line.back().second;
  o.ok = true;
  std::error_code ec;
  std::filesystem::remove_all(ckpt, ec);
  return o;
}

bool trace_goodput(const bench_options& b) {
  scratch s;
  const auto trace = cut_trace(b, s.dir);
  // Fault-free, on 4 workers: the rate the trace runs are measured against,
  // and the duration the trace's time is sped up to fill.
  run_replay(b, "lazy", "", 1, s.dir); // warm-up: page cache, first start
  const auto clean = run_replay(b, "lazy", "", 1, s.dir);
  if (!clean.ok)
    return false;
  // The trace ends at about 80% of the fault-free run's training time: runs
  // with losses take longer, and every one of them sees the whole trace.
  const double speedup = b.hours * 3600 / (0.8 * clean.training);
  std::printf("trace replay: first %.1f h of %s on at most %d workers, sped up %.0fx "
              "(80%% of the fault-free run's %.1f s of training); GPT, S=4, %d steps "
              "of 8 samples, a checkpoint every 20 steps\n",
              b.hours, b.trace.c_str(), b.max_workers, speedup, clean.training, b.steps);
  std::printf("  fault-free (lazy, 4 workers) %7.2f samples/s over %.1f s\n",
              clean.goodput, clean.wall);
  bool ok = true;
  for (const char* mode : {"lazy", "eager"}) {
    const auto o = run_replay(b, mode, trace, speedup, s.dir);
    if (!o.ok) {
      ok = false;
      continue;
    }
    std::printf("  %-5s %7.2f samples/s over %.1f s, %.3f of the fault-free run's "
                "(separate runs: this machine's run-to-run noise is about 10%%); %d "
                "removals, %d workers added, %d new plans, %d rollbacks\n",
                mode, o.goodput, o.wall, o.goodput / clean.goodput, o.kills, o.added,
                o.replans, o.rollbacks);
    std::printf("        within the run: %s", o.launcher.c_str());
  }
  return ok;
}

} // namespace

int bench_main(int argc, char** argv) {
  bench_options b;
  CLI::App app{"bamboo-bench-elastic: re-plan latency and goodput under a spot trace, "
               "across processes"};
  app.add_option("--part", b.part, "replan, repartition, trace or all")
      ->check(CLI::IsMember({"replan", "repartition", "trace", "all"}))
      ->capture_default_str();
  app.add_option("--rounds", b.rounds, "rounds of the re-plan latency")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--trace", b.trace, "spot trace (delta_ms,add|remove,node)")
      ->check(CLI::ExistingFile)
      ->capture_default_str();
  app.add_option("--hours", b.hours, "the trace's first hours to replay")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--steps", b.steps, "steps of each trace run")
      ->check(CLI::Range(10, 100000))
      ->capture_default_str();
  app.add_option("--max-workers", b.max_workers, "worker slots of the replay")
      ->check(CLI::Range(4, 64))
      ->capture_default_str();
  if (auto status =
          bamboo::process::parse_or_exit(app, argc, argv, "bamboo-bench-elastic"))
    return *status;
  bool ok = true;
  if (b.part == "all" || b.part == "replan")
    ok = replan_latency(b) && ok;
  if (b.part == "all" || b.part == "repartition")
    ok = repartition_cost(b) && ok;
  if (b.part == "all" || b.part == "trace")
    ok = trace_goodput(b) && ok;
  return ok ? 0 : 1;
}

} // namespace bamboo::bench::elastic_bench
