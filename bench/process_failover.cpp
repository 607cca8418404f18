#include "bench/process_failover.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.hpp"
#include "bench/watched_child.hpp"
#include "examples/cluster/child_process.hpp"

namespace bamboo::bench {

namespace {

std::vector<double> step_seconds(const std::string& csv) {
  std::vector<double> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const auto cells = csv_cells(line);
    // Fault-free steps only, warm-up (steps 0 and 1) left out.
    if (cells.size() >= 8 && cells[7].empty() && std::stol(cells[0]) >= 2)
      out.push_back(std::stod(cells[6]));
  }
  return out;
}

} // namespace

bool process_failover(const char* train_bin, int rounds) {
  constexpr int steps = 14;
  std::mt19937 rng(2026);
  std::vector<double> latency, step_time;
  for (int r = 0; r < rounds; ++r) {
    const std::string csv =
        "/tmp/bamboo_bench_failover_" + std::to_string(getpid()) + ".csv";
    watched_child run({train_bin,        "--processes",
                       "--stages",       "4",
                       "--layers",       "4",
                       "--d-model",      "128",
                       "--heads",        "4",
                       "--seq-len",      "64",
                       "--micro-batch",  "4",
                       "--global-batch", "16",
                       "--steps",        std::to_string(steps),
                       "--threads",      "1",
                       "--log-level",    "warn",
                       "--metrics",      csv});
    const int node = static_cast<int>(rng() % 4);
    const int step = 4 + static_cast<int>(rng() % 5);
    std::smatch m;
    clock_type::time_point at;
    if (!run.wait_for(
            std::regex("joined as node " + std::to_string(node) + R"( \(pid (\d+)\))"), m,
            at, std::chrono::seconds(30)))
      return false;
    const pid_t victim = static_cast<pid_t>(std::stoi(m[1].str()));
    clock_type::time_point before;
    if (!run.wait_for(std::regex("^step " + std::to_string(step - 2) + R"( \()"), m,
                      before, std::chrono::seconds(60)) ||
        !run.wait_for(std::regex("^step " + std::to_string(step - 1) + R"( \()"), m, at,
                      std::chrono::seconds(60)))
      return false;
    // A random point of the next step, by the last step's length.
    const double last = std::chrono::duration<double>(at - before).count();
    std::this_thread::sleep_for(std::chrono::duration<double>(
        std::uniform_real_distribution<double>(0, 0.8 * last)(rng)));
    const auto killed = clock_type::now();
    kill(victim, SIGKILL);
    clock_type::time_point done;
    if (!run.wait_for(std::regex(R"(step \d+ \(\d+/\d+\) .*failover)"), m, done,
                      std::chrono::seconds(60)) ||
        run.wait_exit() != 0)
      return false;
    latency.push_back(std::chrono::duration<double>(done - killed).count());
    for (double s : step_seconds(csv))
      step_time.push_back(s);
    std::remove(csv.c_str());
  }
  const double l = median(latency), s = median(step_time);
  std::printf("multi-process failover (GPT, S=4, kill -9 of a worker at a random point "
              "of a step, %d runs):\n  kill to the step's completion %s\n  fault-free "
              "step (warm-up left out) %s\n  ratio %.2f step times\n",
              rounds, bench::spread(latency).c_str(), bench::spread(step_time).c_str(),
              l / s);
  return true;
}

} // namespace bamboo::bench
