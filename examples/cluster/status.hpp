// The launcher's status channel: bamboo-manager and bamboo-worker write one
// machine-readable line per event to the descriptor named by BAMBOO_STATUS_FD
// (when it is set), apart from what they print for people, so that --quiet or
// a log level changes nothing the launcher relies on. Lines:
//   listening PORT      the manager takes joins
//   started             all workers joined, the first step begins
//   committed K         step K committed
//   joined NODE PID     a worker joined as NODE (again: after a fence)
//   rollback K          the run goes on from the checkpoint of step K
//   orphaned PID        a worker leaves because the manager went silent
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace bamboo::status {

inline constexpr const char* fd_variable = "BAMBOO_STATUS_FD";

// Writes `line` and a newline in one write (whole lines even when processes
// share the pipe); nothing when BAMBOO_STATUS_FD is unset.
void emit(const std::string& line);

struct event {
  std::string kind;
  std::vector<long> values;
};
// "committed 3" -> {committed, {3}}; nullopt for a line that is not an event.
std::optional<event> parse(const std::string& line);

// `line` and a newline to standard error in one write: the children of a local
// cluster share one output pipe, and a line written piecewise (as std::cerr's
// << does) can interleave with another process's.
void say(const std::string& line);

} // namespace bamboo::status
