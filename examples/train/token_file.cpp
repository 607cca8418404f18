#include "examples/train/token_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "actors/net/auth.hpp"

namespace bamboo::app {

namespace {

extern "C" void remove_and_reraise(int sig);

// What a signal handler removes: fixed buffers, set before the handler can
// run (async-signal-safe: unlink and rmdir only).
constexpr int max_dirs = 4;
char cleanup_files[max_dirs][2][512];
char cleanup_dirs[max_dirs][512];
volatile sig_atomic_t cleanup_used[max_dirs];

extern "C" void remove_and_reraise(int sig) {
  remove_token_files_now();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void handle_stop_signals() {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0 || now.sa_handler != SIG_DFL ||
        (now.sa_flags & SA_SIGINFO))
      continue; // the program's own handler ends it in order (destructors run)
    struct sigaction sa {};
    sa.sa_handler = remove_and_reraise;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
  }
}

int remember(const std::string& dir, const std::string& a, const std::string& b) {
  if (dir.size() >= 512 || a.size() >= 512 || b.size() >= 512)
    return -1;
  for (int i = 0; i < max_dirs; ++i) {
    if (cleanup_used[i])
      continue;
    std::strcpy(cleanup_dirs[i], dir.c_str());
    std::strcpy(cleanup_files[i][0], a.c_str());
    std::strcpy(cleanup_files[i][1], b.c_str());
    cleanup_used[i] = 1;
    handle_stop_signals();
    return i;
  }
  return -1;
}

std::filesystem::path base_dir() {
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg && *xdg) {
    std::error_code ec;
    if (std::filesystem::is_directory(xdg, ec))
      return xdg;
  }
  return std::filesystem::temp_directory_path();
}

// `token`, or a fresh one of 32 hex digits, in `path` (0600, created anew);
// empty on failure.
std::string write_token(const std::string& path, std::string token) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return {};
  if (token.empty()) {
    std::random_device rd;
    for (int i = 0; i < 32; ++i)
      token += "0123456789abcdef"[rd() % 16];
  }
  const auto line = token + "\n";
  const bool fine =
      ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return fine ? token : std::string{};
}

} // namespace

void remove_token_files_now() {
  for (int i = 0; i < max_dirs; ++i) {
    if (!cleanup_used[i])
      continue;
    ::unlink(cleanup_files[i][0]);
    ::unlink(cleanup_files[i][1]);
    ::rmdir(cleanup_dirs[i]);
  }
}

token_file::token_file(const std::string& token, const std::string& operator_token)
    : user_given_(!token.empty()) {
  dir_ = (base_dir() / "bamboo-token-XXXXXX").string();
  if (!mkdtemp(dir_.data())) { // mode 0700
    dir_.clear();
    return;
  }
  remember(dir_, dir_ + "/token", dir_ + "/operator-token");
  token_ = write_token(dir_ + "/token", token);
  operator_token_ = write_token(dir_ + "/operator-token", operator_token);
  if (!token_.empty() && !operator_token_.empty()) {
    path_ = dir_ + "/token";
    operator_path_ = dir_ + "/operator-token";
  }
}

token_file::~token_file() {
  if (dir_.empty())
    return;
  for (int i = 0; i < max_dirs; ++i)
    if (cleanup_used[i] && dir_ == cleanup_dirs[i])
      cleanup_used[i] = 0;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::unique_ptr<token_file> run_tokens(const std::string& token_path,
                                       const std::string& operator_path) {
  std::string error, token, op;
  if (!token_path.empty() || std::getenv("BAMBOO_TOKEN")) {
    auto t = load_token(token_path, error);
    if (!t) {
      std::fprintf(stderr, "bamboo-train: error: %s\n", error.c_str());
      return nullptr;
    }
    token = *t;
  }
  if (auto o = load_operator_token(operator_path, error))
    op = *o;
  else if (!error.empty() || !operator_path.empty()) {
    std::fprintf(stderr, "bamboo-train: error: %s\n",
                 error.empty() ? "the operator token file is empty" : error.c_str());
    return nullptr;
  }
  auto files = std::make_unique<token_file>(token, op);
  if (files->path().empty()) {
    std::perror("bamboo-train: cannot write the run's token files");
    return nullptr;
  }
  return files;
}

} // namespace bamboo::app
