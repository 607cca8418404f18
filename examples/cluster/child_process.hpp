// A child process that cannot outlive whoever started it: it runs in a process
// group of its own, gets SIGKILL when its parent dies (PR_SET_PDEATHSIG), and
// its whole group is killed and reaped when the handle goes (a failed test, an
// exception, Ctrl-C in the launcher). Used by bamboo-train --processes, the
// multi-process tests and the benchmarks.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bamboo::proc {

struct child_options {
  std::vector<std::string> args;                        // args[0]: the program's path
  std::vector<std::pair<std::string, std::string>> env; // set in the child
  std::string log_file;      // stdout and stderr to this file (else inherited)
  int stdout_fd = -1;        // or stdout to this descriptor (else inherited)
  bool stderr_too = false;   // and stderr to it as well
  std::vector<int> pass_fds; // descriptors the program keeps (all others close on exec)
};

class child {
public:
  explicit child(child_options opts);
  ~child();
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  child(child&& other) noexcept;
  child& operator=(child&& other) noexcept;

  pid_t pid() const { return pid_; }
  // kill(pid, sig) while it has not been reaped; false once it has.
  bool signal(int sig) const;
  // The exit status once it ended (128 + signal for a signal), without waiting.
  std::optional<int> poll();
  // Waits at most `timeout`; nullopt if it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // SIGKILL to its whole process group, then reaps it.
  void kill_group();

private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  bool group_killed_ = false;
  int status_ = 0;
};

// The running program (to start itself again) and its directory (to start
// its siblings).
std::string program_path();
std::string program_dir();

} // namespace bamboo::proc
