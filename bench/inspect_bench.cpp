// What an attached console costs training, measured in one invocation: the
// benchmark GPT (4 x d256, seq 128, G=32 m=4) on S=2 stages in one embedded
// run, with lazy redundancy, each round twice, interleaved: alone, and with
// bamboo-train --inspect-port and bamboo-inspect attached, asking for a
// snapshot every 100 ms (--watch --period-ms 100: the requests the full-screen
// view makes at 10 Hz, without a terminal to draw on). The figure is the
// steady-state throughput with the console over without it (median step
// interval from the second step on), per round and its median.
#include <cstdio>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "examples/cluster/parse_or_exit.hpp"

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"

namespace {

using namespace bamboo::bench;

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

} // namespace

int main(int argc, char** argv) {
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
  std::vector<double> alone, watched, ratios;
  std::size_t snapshots = 0;
  for (int round = 0; round < rounds; ++round) {
    watched_child plain(train_args(steps, false));
    auto a = step_interval(plain, 1);
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
    auto w = step_interval(run, 1);
    console.wait_exit(std::chrono::seconds(30)); // --watch ends with the run
    snapshots += console.matches(std::regex("\\{")).size();
    if (!a || !w) {
      std::printf("round %d: a run failed\n", round);
      return 1;
    }
    alone.push_back(*a);
    watched.push_back(*w);
    ratios.push_back(*a / *w);
  }
  std::printf("step interval, alone:            %s\n", spread(alone).c_str());
  std::printf("step interval, console attached: %s\n", spread(watched).c_str());
  std::printf("events the console printed: %zu\n", snapshots);
  std::printf("per round throughput with / without: %s\n", spread(ratios, "").c_str());
  const double r = median(ratios);
  std::printf(
      "throughput with the console at 10 Hz / without: %.3f  (goal >= 0.98, %s)\n", r,
      r >= 0.98 ? "met" : "MISSED");
  return 0;
}
