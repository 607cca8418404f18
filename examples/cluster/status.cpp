#include "examples/cluster/status.hpp"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace bamboo::status {

namespace {
int channel() {
  static const int fd = [] {
    const char* v = std::getenv(fd_variable);
    return v ? std::atoi(v) : -1;
  }();
  return fd;
}
} // namespace

void emit(const std::string& line) {
  const int fd = channel();
  if (fd < 0)
    return;
  const std::string out = line + "\n";
  ssize_t ignored = write(fd, out.data(), out.size()); // under PIPE_BUF: atomic
  (void)ignored;
}

void say(const std::string& line) {
  const std::string out = line + "\n";
  ssize_t ignored = write(STDERR_FILENO, out.data(), out.size());
  (void)ignored;
}

std::optional<event> parse(const std::string& line) {
  std::istringstream in(line);
  event e;
  if (!(in >> e.kind))
    return std::nullopt;
  static const std::vector<std::pair<std::string, std::size_t>> kinds{
      {"listening", 1}, {"started", 0},  {"committed", 1},
      {"joined", 2},    {"rollback", 1}, {"orphaned", 1}};
  std::size_t want = 0;
  bool known = false;
  for (const auto& [k, n] : kinds)
    if (k == e.kind) {
      known = true;
      want = n;
    }
  if (!known)
    return std::nullopt;
  long v = 0;
  while (in >> v)
    e.values.push_back(v);
  if (e.values.size() != want || !in.eof())
    return std::nullopt;
  return e;
}

} // namespace bamboo::status
