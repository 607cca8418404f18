#include "examples/train/local_cluster.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
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
    if (stdout_fd >= 0)
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
                      const std::string& log_level) {
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
  std::vector<std::string> margs{sibling("bamboo-manager"), "--port", "0"};
  margs.insert(margs.end(), manager_args.begin(), manager_args.end());
  const pid_t manager = spawn(margs, pipe_fds[1]);
  close(pipe_fds[1]);
  std::vector<pid_t> workers;
  auto cleanup = [&] {
    for (pid_t w : workers)
      kill(w, SIGKILL);
    for (pid_t w : workers)
      waitpid(w, nullptr, 0);
    workers.clear();
  };
  // The manager's output, line by line: its port, then the run.
  FILE* in = fdopen(pipe_fds[0], "r");
  static const std::regex listening(R"(listening on [^:]+:(\d+))");
  char line[4096];
  bool started = false;
  while (!interrupted && std::fgets(line, sizeof(line), in)) {
    std::fputs(line, stdout);
    std::fflush(stdout);
    std::cmatch m;
    if (!started && std::regex_search(line, m, listening)) {
      started = true;
      for (int n = 0; n < stages; ++n) {
        workers.push_back(spawn({sibling("bamboo-worker"), "--manager",
                                 "127.0.0.1:" + m[1].str(), "--log-level", log_level},
                                -1));
        std::printf("bamboo-train: worker %d is process %d\n", n,
                    static_cast<int>(workers.back()));
      }
      std::fflush(stdout);
    }
  }
  fclose(in);
  if (interrupted)
    kill(manager, SIGKILL);
  int status = 0;
  waitpid(manager, &status, 0);
  cleanup();
  if (interrupted)
    return 128 + interrupted;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace bamboo::app
