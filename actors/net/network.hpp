// The actor-system set-up of a process that talks to others: CAF's network
// layer (the middleman) on top of bamboo's own registrations (actors/system.hpp),
// and the control frames.
#pragma once

namespace caf {
class actor_system_config;
}

namespace bamboo {

void configure_network(caf::actor_system_config& cfg);

} // namespace bamboo
