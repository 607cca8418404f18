// One actor-system set-up for every mode: bamboo's errors and message types
// registered with CAF. Across processes, actors/net/network.hpp adds CAF's
// network layer and the frames on top of this.
#pragma once

namespace caf {
class actor_system_config;
}

namespace bamboo {

void configure(caf::actor_system_config& cfg);

} // namespace bamboo
