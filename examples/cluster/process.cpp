#include "examples/cluster/process.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include "actors/net/auth.hpp"

namespace bamboo::process {

namespace {
volatile std::sig_atomic_t received = 0;
extern "C" void on_stop_signal(int sig) {
  received = sig;
}
void (*volatile graceful_cleanup)() = nullptr;
extern "C" void on_graceful_stop(int sig) {
  if (received != 0) { // the second: no more waiting
    if (graceful_cleanup)
      graceful_cleanup();
    ::_exit(128 + sig);
  }
  received = sig;
}
} // namespace

void install_graceful_stop(void (*cleanup)()) {
  graceful_cleanup = cleanup;
  struct sigaction sa {};
  sa.sa_handler = on_graceful_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() {
  return received;
}

std::optional<std::string> local_address_towards(const std::string& host,
                                                 std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    why = gai_strerror(rc);
    return std::nullopt;
  }
  std::optional<std::string> out;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  char text[INET_ADDRSTRLEN] = {};
  if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      !inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)))
    why = std::strerror(errno);
  else
    out = text;
  if (fd >= 0)
    close(fd);
  freeaddrinfo(found);
  return out;
}

std::optional<std::string> token_or_complain(const char* program,
                                             const std::string& file) {
  std::string error;
  auto token = load_token(file, error);
  if (!token)
    std::cerr << program << ": error: " << error << "\n";
  return token;
}

std::optional<std::string> operator_token_or_complain(const char* program,
                                                      const std::string& file) {
  std::string error;
  auto token = load_operator_token(file, error);
  if (token)
    return token;
  if (error.empty() && !file.empty())
    error = "the operator token file '" + file + "' is empty";
  if (error.empty())
    return std::string{};
  std::cerr << program << ": error: " << error << "\n";
  return std::nullopt;
}

} // namespace bamboo::process
