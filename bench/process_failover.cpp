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
#include "examples/cluster/child_process.hpp"

namespace bamboo::bench {

namespace {

using clock_type = std::chrono::steady_clock;

// A child whose stdout lines are read, time-stamped, on a thread; it and its
// group are killed and reaped when the run ends, however it ends.
class watched_child {
public:
  explicit watched_child(std::vector<std::string> args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe");
    proc::child_options o;
    o.args = std::move(args);
    o.stdout_fd = fds[1];
    proc_ = std::make_unique<proc::child>(std::move(o));
    close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      FILE* in = fdopen(fd, "r");
      char buf[4096];
      while (std::fgets(buf, sizeof(buf), in)) {
        std::lock_guard<std::mutex> g{mtx_};
        lines_.push_back({clock_type::now(), buf});
      }
      fclose(in);
    });
  }
  ~watched_child() {
    proc_.reset(); // the pipe's writers die with the group: the reader ends
    if (reader_.joinable())
      reader_.join();
  }
  // The first line matching `re` and when it came, waiting at most `timeout`.
  bool wait_for(const std::regex& re, std::smatch& m, clock_type::time_point& at,
                std::chrono::seconds timeout) {
    const auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      {
        std::lock_guard<std::mutex> g{mtx_};
        for (const auto& [t, text] : lines_)
          if (std::regex_search(text, m, re)) {
            at = t;
            return true;
          }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  int wait_exit() { return proc_->wait(std::chrono::seconds(120)).value_or(-1); }

private:
  std::unique_ptr<proc::child> proc_;
  std::thread reader_;
  std::mutex mtx_;
  std::vector<std::pair<clock_type::time_point, std::string>> lines_;
};

std::vector<double> step_seconds(const std::string& csv) {
  std::vector<double> out;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i)
      if (i == line.size() || line[i] == ',') {
        cells.push_back(line.substr(start, i - start));
        start = i + 1;
      }
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
    if (!run.wait_for(std::regex("step " + std::to_string(step - 1) + "/"), m, before,
                      std::chrono::seconds(60)) ||
        !run.wait_for(std::regex("step " + std::to_string(step) + "/"), m, at,
                      std::chrono::seconds(60)))
      return false;
    // A random point of the next step, by the last step's length.
    const double last = std::chrono::duration<double>(at - before).count();
    std::this_thread::sleep_for(std::chrono::duration<double>(
        std::uniform_real_distribution<double>(0, 0.8 * last)(rng)));
    const auto killed = clock_type::now();
    kill(victim, SIGKILL);
    clock_type::time_point done;
    if (!run.wait_for(std::regex(R"(step \d+/\d+ .*failover)"), m, done,
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
