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

struct verb_info {
  const char* name;
  inspect_command::kind kind;
  const char* usage;
  std::size_t least, most; // words, the verb included
};

const verb_info verbs[] = {
    {"preempt", inspect_command::kind::preempt, "preempt NODE", 2, 2},
    {"notice", inspect_command::kind::notice, "notice NODE [SECONDS]", 2, 3},
    {"drain", inspect_command::kind::drain, "drain NODE", 2, 2},
    {"checkpoint", inspect_command::kind::checkpoint, "checkpoint", 1, 1},
    {"redundancy", inspect_command::kind::redundancy, "redundancy off|lazy|eager", 2, 2},
    {"pause", inspect_command::kind::pause, "pause", 1, 1},
    {"resume", inspect_command::kind::resume, "resume", 1, 1},
    {"help", inspect_command::kind::help, "help", 1, 1},
};

} // namespace

std::string command_help() {
  return "preempt NODE: kill the node at once (its worker process, as kill -9 would; "
         "its actors in an embedded run)\n"
         "notice NODE [SECONDS]: give the node a preemption notice (as SIGTERM does); "
         "SECONDS sets its deadline\n"
         "drain NODE: move the node's stages to their shadows at the next step boundary, "
         "then let it go\n"
         "checkpoint: take a checkpoint at the next step boundary (runs with "
         "--checkpoint-dir)\n"
         "redundancy off|lazy|eager: run with this redundancy from the next step "
         "boundary\n"
         "pause: start no new step until resume\n"
         "resume: go on after pause\n"
         "help: this list";
}

parsed_command parse_command(const std::vector<std::string>& words) {
  parsed_command out;
  if (words.empty()) {
    out.error = "no command (help lists them)";
    return out;
  }
  const auto& verb = words[0];
  const verb_info* v = nullptr;
  for (const auto& candidate : verbs)
    if (verb == candidate.name)
      v = &candidate;
  if (!v) {
    out.error = "unknown command '" + verb + "' (help lists them)";
    return out;
  }
  if (words.size() < v->least || words.size() > v->most) {
    out.error =
        v->most == 1 ? verb + " takes no arguments" : std::string("usage: ") + v->usage;
    return out;
  }
  inspect_command c;
  c.what = v->kind;
  if (c.what == inspect_command::kind::redundancy) {
    const auto& m = words[1];
    if (m == "off")
      c.mode = redundancy_mode::off;
    else if (m == "lazy")
      c.mode = redundancy_mode::lazy;
    else if (m == "eager")
      c.mode = redundancy_mode::eager;
    else {
      out.error = "redundancy: '" + m + "' is not off, lazy or eager";
      return out;
    }
  } else if (v->least == 2) {
    auto node = whole(words[1]);
    if (!node) {
      out.error = verb + ": '" + words[1] + "' is not a node number";
      return out;
    }
    c.node = static_cast<int>(*node);
  }
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
