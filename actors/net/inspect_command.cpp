#include "actors/net/inspect_command.hpp"

#include <cmath>
#include <cstdlib>

namespace bamboo {

namespace {

std::optional<long> whole(const std::string& w) {
  if (w.empty() || w.size() > 9 || w.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::strtol(w.c_str(), nullptr, 10);
}

std::optional<double> positive(const std::string& w) {
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  if (w.empty() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 3600)
    return std::nullopt;
  return v;
}

} // namespace

std::string command_help() {
  return "preempt NODE: kill the node's worker process at once (as kill -9 would)\n"
         "notice NODE [SECONDS]: give the node a preemption notice (as SIGTERM does); "
         "SECONDS sets its deadline\n"
         "help: this list";
}

parsed_command parse_command(const std::vector<std::string>& words) {
  parsed_command out;
  if (words.empty()) {
    out.error = "no command (help lists them)";
    return out;
  }
  const auto& verb = words[0];
  inspect_command c;
  if (verb == "help") {
    if (words.size() > 1)
      out.error = "help takes no arguments";
    else
      out.command = c;
    return out;
  }
  if (verb != "preempt" && verb != "notice") {
    out.error = "unknown command '" + verb + "' (help lists them)";
    return out;
  }
  c.what =
      verb == "preempt" ? inspect_command::kind::preempt : inspect_command::kind::notice;
  const std::size_t most = verb == "preempt" ? 2 : 3;
  if (words.size() < 2 || words.size() > most) {
    out.error =
        verb == "preempt" ? "usage: preempt NODE" : "usage: notice NODE [SECONDS]";
    return out;
  }
  auto node = whole(words[1]);
  if (!node) {
    out.error = verb + ": '" + words[1] + "' is not a node number";
    return out;
  }
  c.node = static_cast<int>(*node);
  if (words.size() == 3) {
    auto s = positive(words[2]);
    if (!s) {
      out.error = "notice: '" + words[2] + "' is not a number of seconds in (0, 3600]";
      return out;
    }
    c.seconds = *s;
  }
  out.command = c;
  return out;
}

} // namespace bamboo
