// A benchmark's child process (bamboo-train, mostly) whose stdout lines are
// read and time-stamped on a thread, to time what it prints.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "examples/cluster/child_process.hpp"

namespace bamboo::bench {

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
    o.stderr_too = true; // the log lines too
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
  pid_t pid() const { return proc_->pid(); }
  int wait_exit(std::chrono::seconds timeout = std::chrono::seconds(120)) {
    return proc_->wait(timeout).value_or(-1);
  }
  // Every line matching `re`, with when it came.
  std::vector<std::pair<clock_type::time_point, std::string>>
  matches(const std::regex& re) {
    std::lock_guard<std::mutex> g{mtx_};
    std::vector<std::pair<clock_type::time_point, std::string>> out;
    for (const auto& [t, text] : lines_)
      if (std::regex_search(text, re))
        out.emplace_back(t, text);
    return out;
  }

private:
  std::unique_ptr<proc::child> proc_;
  std::thread reader_;
  std::mutex mtx_;
  std::vector<std::pair<clock_type::time_point, std::string>> lines_;
};

} // namespace bamboo::bench
