// Children of the multi-process tests, on the one child-process helper
// (examples/cluster/child_process.hpp): each in its own process group, killed
// by the kernel if the test binary dies, and killed and reaped with its whole
// group when the test that started it ends, a failed assertion included. Logs
// and files go to a scratch directory (mkdtemp) removed when the test ends.
// Every child carries BAMBOO_TEST_TAG, inherited by its own children, so a
// test can check that no process of ours is left.
#pragma once

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "examples/cluster/child_process.hpp"
#include "tests/scratch_dir.hpp"

namespace bamboo::test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// The tag of this test binary's children.
// The cluster token of the runs tests start (bamboo-train takes $BAMBOO_TOKEN).
inline const std::string test_token = "a-test-cluster-token-0123456789";

inline std::string test_tag() {
  return "bamboo-test-" + std::to_string(getpid());
}

// Live processes (zombies too) whose environment carries this binary's tag.
inline std::vector<pid_t> tagged_processes() {
  std::vector<pid_t> out;
  const std::string want = "BAMBOO_TEST_TAG=" + test_tag();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
    std::size_t start = 0;
    for (std::size_t i = 0; i <= env.size(); ++i)
      if (i == env.size() || env[i] == '\0') {
        if (env.compare(start, i - start, want) == 0)
          out.push_back(static_cast<pid_t>(std::stol(name)));
        start = i + 1;
      }
  }
  return out;
}

// Waits up to `timeout` for every tagged process to be gone (a killed group
// takes a moment to go); returns those still there.
inline std::vector<pid_t> leftover_processes(std::chrono::milliseconds timeout = 3s) {
  const auto deadline = clock_type::now() + timeout;
  auto left = tagged_processes();
  while (!left.empty() && clock_type::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    left = tagged_processes();
  }
  return left;
}

// A log's warnings and errors, first in a failure's message: a long log's
// decisive lines survive a report that keeps only its head.
inline std::string notable_lines(const std::string& log, std::size_t most = 30) {
  std::istringstream in(log);
  std::string line, out;
  std::size_t n = 0;
  while (std::getline(in, line) && n < most)
    if (line.find("[warning]") != std::string::npos ||
        line.find("[error]") != std::string::npos ||
        line.find("fatal") != std::string::npos ||
        line.find("error:") != std::string::npos) {
      out += line + '\n';
      ++n;
    }
  return out.empty() ? "(no warning or error)" : out;
}

// Declared first in a test, checked last: no process of ours is left, whether
// the test passed or a check failed. (Needs Catch included before this header.)
struct no_leftovers {
  ~no_leftovers() {
    auto left = leftover_processes();
    INFO(left.size() << " processes left behind");
    CHECK(left.empty());
  }
};

// A child process whose stdout and stderr go to a log file in `dir`.
class child {
public:
  child(const scratch_dir& dir, const std::string& name, std::vector<std::string> args,
        const std::string& token)
      : log_(dir.file(name + ".log")), proc_(options(log_, std::move(args), token)) {}

  pid_t pid() const { return proc_.pid(); }
  bool signal(int sig) const { return proc_.signal(sig); }
  // Not yet ended (a zombie counts as ended: it is reaped here).
  bool running() { return !proc_.poll(); }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log matches `re`; returns the match (its first group if
  // any) or "" on timeout.
  std::string wait_for(const std::string& re,
                       std::chrono::milliseconds timeout = 10s) const {
    const std::regex pattern(re);
    const auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      std::smatch m;
      auto text = log();
      if (std::regex_search(text, m, pattern))
        return m.str(m.size() > 1 ? 1 : 0);
      std::this_thread::sleep_for(10ms);
    }
    return "";
  }
  // Exit status (128 + signal after one), waiting at most `timeout`; -1 if still running.
  int wait_exit(std::chrono::milliseconds timeout = 10s) {
    return proc_.wait(timeout).value_or(-1);
  }

private:
  static proc::child_options options(const std::string& log,
                                     std::vector<std::string> args,
                                     const std::string& token) {
    proc::child_options o;
    o.args = std::move(args);
    o.log_file = log;
    o.env = {{"BAMBOO_TOKEN", token}, {"BAMBOO_TEST_TAG", test_tag()}};
    return o;
  }
  std::string log_;
  proc::child proc_;
};

} // namespace bamboo::test
