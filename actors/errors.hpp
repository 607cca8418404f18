// bamboo's error codes, registered with CAF so they cross actors (and processes)
// as caf::error values; never exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include "actors/plan/run_record.hpp"

namespace caf {
class actor_system_config;
}

namespace bamboo {

enum class errc : std::uint8_t {
  invalid_config = 1,    // bad options: the user must fix the command line
  invalid_data,          // the data source cannot be used
  stage_failed,          // a stage could not finish a step
  transport_failure,     // tensors could not be moved
  unrecoverable_failure, // losses shadows cannot cover (checkpoint fallback)
  node_lost,             // a worker process is gone (its context says how)
  checkpoint_failed,     // a checkpoint could not be written or read
  plan_changed,          // the plan ended at a step boundary for a new one
  connection_refused,    // the manager's port refused this client, or is none
};

constexpr caf::atom_value error_category = caf::atom("bamboo");

const char* to_string(errc e);
caf::error make_error(errc e);
caf::error make_error(errc e, std::string context);
// errc::node_lost saying how: "connection lost (remote_link_unreachable)".
caf::error make_loss(failover_cause cause, const std::string& detail);
struct loss {
  failover_cause cause;
  std::string detail;
};
// The cause and detail a make_loss error carries; nullopt for any other error.
std::optional<loss> loss_of(const caf::error& err);
// Whether err is bamboo's error e.
bool is_error(const caf::error& err, errc e);
// "bamboo error: invalid_data: cannot read ..." as one line for users.
std::string describe(const caf::error& err);
// Why a peer's connection or actor ended, in words: "the process died, or its
// host is unreachable" for CAF's remote_link_unreachable.
std::string exit_words(const caf::error& reason);

void register_errors(caf::actor_system_config& cfg);

} // namespace bamboo
