#include "actors/node_agent.hpp"

#include <caf/all.hpp>

#include "actors/failure_detector.hpp"
#include "model/stage_executor.hpp"

namespace bamboo {

node_handles spawn_node(caf::local_actor* supervisor, const node_spec& spec) {
  node_handles h;
  h.group = std::make_shared<node_group>();
  stage_actor_spec st;
  st.cfg = spec.cfg;
  st.node = spec.node;
  st.injector = spec.injector;
  st.group = h.group;
  st.transports = spec.transports;
  st.sync_through_transport = spec.sync_through_transport;
  if (spec.shadow_stage >= 0) {
    // The replica starts from the same (seeded) initial weights as its owner.
    auto replica = std::make_shared<stage_executor>(spec.cfg, spec.shadow_stage,
                                                    spec.shadow_range, spec.corpus);
    stage_actor_spec sh = st;
    sh.executor = replica;
    h.shadow = spawn_shadow_actor(supervisor, std::move(sh));
    h.group->add(h.shadow);
    // Forward redundant computation runs the replica on the stage's own thread.
    if (spec.cfg.redundancy == redundancy_mode::eager)
      st.replica = replica;
  }
  st.executor =
      std::make_shared<stage_executor>(spec.cfg, spec.stage, spec.range, spec.corpus);
  h.stage = spawn_stage_actor(supervisor, std::move(st));
  h.group->add(h.stage);
  if (!spec.detector)
    return h;
  h.detector = spawn_failure_detector(supervisor, spec.node,
                                      caf::actor_cast<caf::actor>(supervisor),
                                      spec.heartbeat_period);
  h.group->add(h.detector);
  return h;
}

} // namespace bamboo
