#include "examples/train/local_cluster.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <thread>

namespace bamboo::app {

namespace {

volatile sig_atomic_t interrupted = 0;
extern "C" void on_interrupt(int sig) {
  interrupted = sig;
}

std::string sibling(const std::string& name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / name).string();
}

// A fresh token for this cluster only, handed to the children in their environment.
std::string make_token() {
  std::random_device rd;
  std::string t;
  for (int i = 0; i < 32; ++i)
    t += "0123456789abcdef"[rd() % 16];
  return t;
}

pid_t spawn(const std::vector<std::string>& args, int stdout_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    dup2(stdout_fd, 1);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "bamboo-train: error: cannot start %s: %s\n", argv[0],
                 std::strerror(errno));
    _exit(127);
  }
  return pid;
}

} // namespace

int run_local_cluster(const std::vector<std::string>& manager_args, int stages,
                      const std::string& log_level,
                      const std::vector<preempt_spec>& kills) {
  setenv("BAMBOO_TOKEN", make_token().c_str(), 1);
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    std::perror("bamboo-train: pipe");
    return 1;
  }
  // Every child writes its lines into one pipe (short lines arrive whole):
  // the manager's port, the workers' node numbers and pids, the run.
  std::vector<std::string> margs{sibling("bamboo-manager"), "--port", "0"};
  margs.insert(margs.end(), manager_args.begin(), manager_args.end());
  const pid_t manager = spawn(margs, pipe_fds[1]);
  std::vector<pid_t> workers;
  std::map<int, pid_t> pid_of_node;
  std::vector<bool> fired(kills.size(), false);
  static const std::regex listening(R"(listening on [^:]+:(\d+))");
  static const std::regex joined(R"(joined (?:again )?as node (\d+) \(pid (\d+)\))");
  static const std::regex step_done(R"(^step (\d+)/)");
  auto on_line = [&](const std::string& line) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
    std::smatch m;
    if (workers.empty() && std::regex_search(line, m, listening)) {
      for (int n = 0; n < stages; ++n)
        workers.push_back(spawn({sibling("bamboo-worker"), "--manager",
                                 "127.0.0.1:" + m[1].str(), "--log-level", log_level},
                                pipe_fds[1]));
    } else if (std::regex_search(line, m, joined)) {
      pid_of_node[std::stoi(m[1].str())] = static_cast<pid_t>(std::stoi(m[2].str()));
    } else if (std::regex_search(line, m, step_done)) {
      const long done = std::stol(m[1].str()); // steps 0..done-1 are complete
      for (std::size_t i = 0; i < kills.size(); ++i)
        if (!fired[i] && kills[i].step == done && pid_of_node.count(kills[i].node)) {
          fired[i] = true;
          std::printf("bamboo-train: kill -9 of node %d (pid %d) in step %ld\n",
                      kills[i].node, static_cast<int>(pid_of_node[kills[i].node]), done);
          std::fflush(stdout);
          kill(pid_of_node[kills[i].node], SIGKILL);
        }
    }
  };
  // Lines until the manager ends (the workers may outlive it a moment).
  std::string pending;
  int status = 0;
  bool manager_done = false;
  while (!interrupted && !manager_done) {
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    if (poll(&pfd, 1, 50) > 0) {
      char buf[4096];
      const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
      if (n > 0)
        pending.append(buf, static_cast<std::size_t>(n));
    }
    for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
      on_line(pending.substr(0, nl + 1));
      pending.erase(0, nl + 1);
    }
    manager_done = waitpid(manager, &status, WNOHANG) == manager;
  }
  if (interrupted) {
    kill(manager, SIGKILL);
    waitpid(manager, &status, 0);
  }
  for (pid_t w : workers)
    kill(w, SIGKILL);
  for (pid_t w : workers)
    waitpid(w, nullptr, 0);
  // What the children wrote last.
  for (pollfd pfd{pipe_fds[0], POLLIN, 0}; poll(&pfd, 1, 0) > 0;) {
    char buf[4096];
    const ssize_t n = read(pipe_fds[0], buf, sizeof(buf));
    if (n <= 0)
      break;
    pending.append(buf, static_cast<std::size_t>(n));
  }
  std::fputs(pending.c_str(), stdout);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  if (interrupted)
    return 128 + interrupted;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace bamboo::app
