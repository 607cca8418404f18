#include "examples/cluster/process.hpp"

#include <iostream>

#include "actors/net/auth.hpp"

namespace bamboo::process {

namespace {
volatile std::sig_atomic_t received = 0;
extern "C" void on_stop_signal(int sig) {
  received = sig;
}
} // namespace

void install_stop_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

int stop_signal() {
  return received;
}

std::optional<std::string> token_or_complain(const char* program,
                                             const std::string& file) {
  std::string error;
  auto token = load_token(file, error);
  if (!token)
    std::cerr << program << ": error: " << error << "\n";
  return token;
}

} // namespace bamboo::process
