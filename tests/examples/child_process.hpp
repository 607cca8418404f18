// A child process for the multi-process tests: stdout and stderr to a log
// file, killed and reaped (and its log removed) when the test that started it ends.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bamboo::test {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A child process whose stdout and stderr go to a log file.
class child {
public:
  child(const std::string& name, std::vector<std::string> args, const std::string& token)
      : log_("/tmp/bamboo_cluster_" + name + "_" + std::to_string(getpid()) + "_" +
             std::to_string(counter()++) + ".log") {
    std::remove(log_.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "w");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      setenv("BAMBOO_TOKEN", token.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::remove(log_.c_str()); // a failing check has printed what it needs
  }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Waits until the log matches `re`; returns the match or "" on timeout.
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
  // Exit status, waiting at most `timeout` (-1 if still running).
  int wait_exit(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = clock_type::now() + timeout;
    while (clock_type::now() < deadline) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string log_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

} // namespace bamboo::test
