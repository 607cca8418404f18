#include "actors/node.hpp"

#include <caf/all.hpp>

#include "actors/failure_detector.hpp"
#include "actors/stage_actor.hpp"
#include "model/checkpoint.hpp"
#include "model/stage_executor.hpp"

namespace bamboo {

void node_group::add_ptr(caf::strong_actor_ptr p) {
  std::lock_guard<std::mutex> guard{mtx_};
  members_.push_back(std::move(p));
}

void node_group::kill_all(const caf::actor_addr& except) {
  std::vector<caf::strong_actor_ptr> victims;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    victims.swap(members_);
  }
  for (auto& p : victims)
    if (p && p->address() != except)
      caf::anon_send_exit(caf::actor_cast<caf::actor>(p), caf::exit_reason::kill);
}

namespace {
int name_of(const node_resources& r, int node) {
  return node >= 0 && static_cast<std::size_t>(node) < r.names.size()
             ? r.names[static_cast<std::size_t>(node)]
             : node;
}
} // namespace

stage_actor spawn_replica(caf::local_actor* supervisor, int node, const node_resources& r,
                          std::shared_ptr<stage_executor> executor,
                          std::shared_ptr<node_group> group) {
  stage_actor_spec sh;
  sh.cfg = r.cfg;
  sh.node = node;
  sh.name = name_of(r, node);
  sh.executor = std::move(executor);
  sh.injector = r.injector;
  sh.transports = r.transports;
  sh.sync = r.sync;
  sh.group = group;
  sh.actors = r.actors;
  auto actor = spawn_shadow_actor(supervisor, std::move(sh));
  group->add(actor);
  return actor;
}

node_handles spawn_node(caf::local_actor* supervisor, const node_assignment& a,
                        const node_resources& r) {
  node_handles h;
  h.group = std::make_shared<node_group>();
  stage_actor_spec st;
  st.cfg = r.cfg;
  st.node = a.node;
  st.name = name_of(r, a.node);
  st.injector = r.injector;
  st.group = h.group;
  st.transports = r.transports;
  st.sync = r.sync;
  st.actors = r.actors;
  if (a.shadow_stage >= 0) {
    // The replica starts from the same (seeded) initial weights as its owner.
    auto replica = std::make_shared<stage_executor>(r.cfg, a.shadow_stage, a.shadow_range,
                                                    r.corpus, a.pipeline);
    if (r.resume)
      replica->load_checkpoint(*r.resume);
    stage_actor_spec sh = st;
    sh.executor = replica;
    h.shadow = spawn_shadow_actor(supervisor, std::move(sh));
    h.group->add(h.shadow);
    // Forward redundant computation runs the replica on the stage's own thread.
    if (r.cfg.redundancy == redundancy_mode::eager)
      st.replica = replica;
  }
  st.executor =
      std::make_shared<stage_executor>(r.cfg, a.stage, a.range, r.corpus, a.pipeline);
  if (r.resume)
    st.executor->load_checkpoint(*r.resume);
  h.stage = spawn_stage_actor(supervisor, std::move(st));
  h.group->add(h.stage);
  if (!r.detector)
    return h;
  h.detector =
      spawn_failure_detector(supervisor, a.node, caf::actor_cast<caf::actor>(supervisor),
                             r.heartbeat_period, r.actors);
  h.group->add(h.detector);
  return h;
}

} // namespace bamboo
