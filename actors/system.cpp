#include "actors/system.hpp"

#include <caf/actor_system_config.hpp>

#include "actors/errors.hpp"
#include "actors/protocol.hpp"

namespace bamboo {

void configure(caf::actor_system_config& cfg) {
  // Work sharing: idle scheduler threads wait on a condition variable. CAF's
  // default work stealing polls for about 25 ms after every message, so each
  // heartbeat cost an idle worker process 15-20% of a core, and a standby
  // worker's CPU is a training process's on a small machine.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  register_errors(cfg);
  cfg.add_message_type<schema::step_report>("bamboo::step_report");
  cfg.add_message_type<schema::commit>("bamboo::commit");
  cfg.add_message_type<schema::heartbeat>("bamboo::heartbeat");
  cfg.add_message_type<stage_progress>("bamboo::stage_progress");
  cfg.add_message_type<resume_order>("bamboo::resume_order");
  cfg.add_message_type<state_copy>("bamboo::state_copy");
  cfg.add_message_type<checkpoint_shard>("bamboo::checkpoint_shard");
  cfg.add_message_type<param_blob>("bamboo::param_blob");
  cfg.add_message_type<std::vector<param_blob>>("std::vector<bamboo::param_blob>");
  cfg.add_message_type<schema::tensor_digest>("bamboo::tensor_digest");
  cfg.add_message_type<std::vector<schema::tensor_digest>>(
      "std::vector<bamboo::tensor_digest>");
}

} // namespace bamboo
