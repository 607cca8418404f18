#include "actors/messages.hpp"

#include <caf/actor_system_config.hpp>

namespace bamboo {

void register_messages(caf::actor_system_config& cfg) {
  cfg.add_message_type<schema::step_report>("bamboo::step_report");
  cfg.add_message_type<schema::commit>("bamboo::commit");
  cfg.add_message_type<schema::heartbeat>("bamboo::heartbeat");
  cfg.add_message_type<stage_progress_msg>("bamboo::stage_progress");
  cfg.add_message_type<param_blob>("bamboo::param_blob");
  cfg.add_message_type<std::vector<param_blob>>("std::vector<bamboo::param_blob>");
}

} // namespace bamboo
