// An observer's command as a plain value: the words typed at bamboo-inspect's
// prompt (or after --json), checked before the gateway acts on them. Tested
// without actors.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace bamboo {

struct inspect_command {
  enum class kind { preempt, notice, drain, checkpoint, redundancy, pause, resume, help };
  kind what = kind::help;
  int node = -1;      // preempt, notice, drain
  double seconds = 0; // notice: the deadline; 0: the worker's own
  redundancy_mode mode = redundancy_mode::lazy; // redundancy
};

// The command, or the one-line answer saying what is wrong with it.
struct parsed_command {
  std::optional<inspect_command> command;
  std::string error;
};

parsed_command parse_command(const std::vector<std::string>& words);

// What `help` answers: every command, one line each.
std::string command_help();

} // namespace bamboo
