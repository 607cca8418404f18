#include "examples/cluster/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace bamboo::proc {

namespace {

int decode(int st) {
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void become(const child_options& o, pid_t parent, char* const* argv,
                         char* const* envp) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) // the parent died before prctl took effect
    _exit(127);
  if (!o.log_file.empty()) {
    int fd = open(o.log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      _exit(127);
    dup2(fd, 1);
    dup2(fd, 2);
  } else if (o.stdout_fd >= 0) {
    dup2(o.stdout_fd, 1);
    if (o.stderr_too)
      dup2(o.stdout_fd, 2);
  }
  for (int fd : o.pass_fds) { // keep these across exec
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0)
      fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
  }
  execve(argv[0], argv, envp);
  const char* msg = "cannot start the program\n";
  ssize_t ignored = write(2, msg, std::strlen(msg));
  (void)ignored;
  _exit(127);
}

} // namespace

child::child(child_options opts) {
  if (opts.args.empty())
    throw std::invalid_argument("child: no program");
  std::vector<char*> argv;
  for (auto& a : opts.args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child's environment, built before fork (nothing after fork may allocate):
  // ours, with opts.env replacing or adding variables.
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    const auto name = var.substr(0, var.find('='));
    bool replaced = false;
    for (const auto& kv : opts.env)
      replaced = replaced || kv.first == name;
    if (!replaced)
      env.push_back(var);
  }
  for (const auto& [k, v] : opts.env)
    env.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0)
    become(opts, parent, argv.data(), envp.data());
  const int err = errno;
  if (pid_ < 0)
    throw std::runtime_error(std::string("fork: ") + std::strerror(err));
  setpgid(pid_, pid_); // also from here, so a kill right away finds the group
}

child::~child() {
  kill_group();
}

child::child(child&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), reaped_(other.reaped_),
      group_killed_(other.group_killed_), status_(other.status_) {}

child& child::operator=(child&& other) noexcept {
  if (this != &other) {
    kill_group();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = other.reaped_;
    group_killed_ = other.group_killed_;
    status_ = other.status_;
  }
  return *this;
}

bool child::signal(int sig) const {
  return pid_ > 0 && !reaped_ && kill(pid_, sig) == 0;
}

std::optional<int> child::poll() {
  if (pid_ <= 0)
    return std::nullopt;
  if (!reaped_) {
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) != pid_)
      return std::nullopt;
    reaped_ = true;
    status_ = decode(st);
  }
  return status_;
}

std::optional<int> child::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto st = poll())
      return st;
    if (std::chrono::steady_clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void child::kill_group() {
  if (pid_ <= 0 || group_killed_)
    return;
  group_killed_ = true;
  // The group outlives its leader's exit until every member is gone.
  killpg(pid_, SIGKILL);
  if (!reaped_) {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    status_ = decode(st);
  }
}

std::string program_path() {
  std::error_code ec;
  return std::filesystem::read_symlink("/proc/self/exe", ec).string();
}

std::string program_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return self.parent_path().string();
}

} // namespace bamboo::proc
