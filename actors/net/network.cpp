#include "actors/net/network.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>

#include "actors/net/frame_channel.hpp"
#include "actors/system.hpp"

namespace bamboo {

void configure_network(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  configure(cfg);
  register_frames(cfg);
}

} // namespace bamboo
