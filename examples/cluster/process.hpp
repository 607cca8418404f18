// What bamboo-manager and bamboo-worker set up alike: stop signals, the
// cluster token, the command line. (Their actor system: configure_network.)
#pragma once

#include <csignal>
#include <optional>
#include <string>

#include "examples/cluster/parse_or_exit.hpp"

namespace bamboo::process {

// SIGINT and SIGTERM set a flag instead of ending the process. A handler, not
// sigwait: threads that libraries start before main would otherwise take the
// signal with its default action.
void install_stop_handlers();
int stop_signal(); // 0 while none arrived
// The same for a run that stops at its next step boundary on the first signal
// (stop_signal() turns non-zero): a second one ends the process at once with
// status 128 + its number, after `cleanup` (async-signal-safe) when given.
void install_graceful_stop(void (*cleanup)() = nullptr);

// This host's address on the route to `host` (numeric, as the kernel would pick
// it: a UDP socket "connected" there sends nothing); nullopt and `why` otherwise.
std::optional<std::string> local_address_towards(const std::string& host,
                                                 std::string& why);

// The cluster token, or nullopt after printing "<program>: error: ...".
// The operator token ("" when none is given), or nullopt after printing why.
std::optional<std::string> operator_token_or_complain(const char* program,
                                                      const std::string& file);
std::optional<std::string> token_or_complain(const char* program,
                                             const std::string& file);

} // namespace bamboo::process
