// bamboo-inspect's full-screen view (ncurses: in Debian, no other dependency,
// and it restores the terminal on every way out): the run's header and loss
// sparkline, the cluster map (each stage's node and its shadow's), the
// members' states, the latest events, and a prompt for commands.
#pragma once

#include <chrono>
#include <string>

namespace bamboo {
class observer;
}

namespace bamboo::app {

// Runs until `quit` (0), the manager is gone (1) or the terminal is too
// small to start (2); says why on standard error after the screen is restored.
int run_console(observer& o, const std::string& address, std::chrono::milliseconds period,
                std::chrono::milliseconds timeout);

} // namespace bamboo::app
