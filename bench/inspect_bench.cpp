// What an attached console costs training, measured in one invocation: the
// benchmark GPT (4 x d256, seq 128, G=32 m=4) on S=2 stages in one embedded
// run, with lazy redundancy, each round twice, interleaved: alone, and with
// bamboo-train --inspect-port and bamboo-inspect attached, asking for a
// snapshot every 100 ms (--watch --period-ms 100: the requests the full-screen
// view makes at 10 Hz, without a terminal to draw on). The figure is the
// steady-state throughput with the console over without it (median step
// interval from the second step on), per round and its median.
#include <sys/resource.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/cluster/parse_or_exit.hpp"

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"

namespace bamboo::bench::inspect_bench {
namespace {

double seconds(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<std::string> train_args(int steps, bool inspect) {
  std::vector<std::string> a{BAMBOO_TRAIN_BIN,
                             "--stages",
                             "2",
                             "--layers",
                             "4",
                             "--d-model",
                             "256",
                             "--heads",
                             "8",
                             "--seq-len",
                             "128",
                             "--micro-batch",
                             "4",
                             "--global-batch",
                             "32",
                             "--steps",
                             std::to_string(steps),
                             "--threads",
                             "1",
                             "--redundancy",
                             "lazy"};
  if (inspect)
    a.insert(a.end(), {"--inspect-port", "0"});
  return a;
}

// Median interval between the step lines after the first `skip`; nullopt
// when the run failed.
std::optional<double> step_interval(watched_child& run, int skip) {
  if (run.wait_exit(std::chrono::seconds(600)) != 0)
    return std::nullopt;
  const auto steps = run.matches(std::regex(R"(^step \d+ \()"));
  std::vector<double> gaps;
  for (std::size_t i = static_cast<std::size_t>(skip) + 1; i < steps.size(); ++i)
    gaps.push_back(seconds(steps[i - 1].first, steps[i].first));
  if (gaps.empty())
    return std::nullopt;
  return median(gaps);
}

std::optional<double> alone_run(int steps) {
  watched_child plain(train_args(steps, false));
  return step_interval(plain, 1);
}

// CPU seconds (user + system) of a running process, from /proc.
double process_cpu(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto close = text.rfind(')'); // the name may hold spaces
  std::istringstream fields(text.substr(close + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) // utime is field 14, stime 15
    if (i >= 14)
      ticks += std::stod(f);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds (user + system) of this process's reaped children so far.
double children_cpu() {
  rusage u{};
  getrusage(RUSAGE_CHILDREN, &u);
  auto s = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec;
  };
  return s(u.ru_utime) + s(u.ru_stime);
}

} // namespace

int bench_main(int argc, char** argv) {
  int rounds = 3, steps = 14;
  CLI::App app{"bamboo-bench-inspect: training's throughput with bamboo-inspect "
               "attached at 10 Hz over without it"};
  app.add_option("--rounds", rounds, "interleaved pairs of runs")->capture_default_str();
  app.add_option("--steps", steps, "steps per run")->capture_default_str();
  if (auto status =
          bamboo::process::parse_or_exit(app, argc, argv, "bamboo-bench-inspect"))
    return *status;
  std::printf("model: gpt 4 x d256, seq 128, G=32 m=4, S=2 embedded, lazy, 1 thread per "
              "stage; %d rounds of %d steps; the console asks every 100 ms\n",
              rounds, steps);
  std::vector<double> alone, watched, ratios, console_cpu, steady_cpu;
  double polled = 0; // seconds the console was attached, over all rounds
  for (int round = 0; round < rounds; ++round) {
    // Alone first in even rounds, second in odd ones (ABBA): drift cancels.
    std::optional<double> a, w;
    if (round % 2 == 0)
      a = alone_run(steps);
    watched_child run(train_args(steps, true));
    std::smatch m;
    clock_type::time_point at;
    if (!run.wait_for(std::regex(R"(bamboo-inspect --token-file (\S+) (\S+))"), m, at,
                      std::chrono::seconds(60))) {
      std::printf("the run did not say where to attach\n");
      return 1;
    }
    // Attached before the first step ends: every measured step has it.
    watched_child console({BAMBOO_INSPECT_BIN, "--token-file", m.str(1), "--watch",
                           "--period-ms", "100", m.str(2)});
    // Its CPU once started up (2 s after it attached), to the end.
    std::smatch a2;
    clock_type::time_point attached_at;
    double started_cpu = -1;
    auto steady_from = clock_type::now();
    if (run.wait_for(std::regex("an observer attached"), a2, attached_at,
                     std::chrono::seconds(30))) {
      std::this_thread::sleep_until(attached_at + std::chrono::seconds(2));
      steady_from = clock_type::now();
      started_cpu = process_cpu(console.pid());
    }
    w = step_interval(run, 1);
    const auto run_end = clock_type::now();
    const double before = children_cpu();        // the run is reaped, the console not yet
    console.wait_exit(std::chrono::seconds(30)); // --watch ends with the run
    const double cpu = children_cpu() - before;
    // The console was attached, and asked until the run ended.
    const auto attached = run.matches(std::regex("an observer attached"));
    const auto ended = console.matches(std::regex("the watch ends"));
    const auto steps_seen = run.matches(std::regex(R"(^step \d+ \()"));
    if (round % 2 == 1)
      a = alone_run(steps);
    if (!a || !w || attached.empty() || ended.empty() || steps_seen.size() < 2) {
      std::printf("round %d: a run failed, or the console did not stay attached\n",
                  round);
      return 1;
    }
    if (attached.front().first > steps_seen[1].first)
      std::printf("round %d: the console attached after the second step\n", round);
    const double span = seconds(attached.front().first, ended.front().first);
    polled += span;
    console_cpu.push_back(cpu / span);
    if (started_cpu >= 0 && run_end > steady_from)
      steady_cpu.push_back((cpu - started_cpu) / seconds(steady_from, run_end));
    alone.push_back(*a);
    watched.push_back(*w);
    ratios.push_back(*a / *w);
  }
  std::printf("step interval, alone:            %s\n", spread(alone).c_str());
  std::printf("step interval, console attached: %s\n", spread(watched).c_str());
  std::printf("the console attached before the second step and asked until each run "
              "ended: %.1f s in all, about %.0f snapshots\n",
              polled, polled * 10);
  std::printf("the console's own CPU (its process, start-up included) per second "
              "attached: %s\n",
              spread(console_cpu, "core").c_str());
  std::printf("  of which once started (from 2 s after attaching): %s\n",
              spread(steady_cpu, "core").c_str());
  std::printf("per round throughput with / without: %s\n", spread(ratios, "").c_str());
  const double r = median(ratios);
  std::printf(
      "throughput with the console at 10 Hz / without: %.3f  (goal >= 0.98, %s)\n", r,
      r >= 0.98 ? "met" : "MISSED");
  return 0;
}

} // namespace bamboo::bench::inspect_bench
