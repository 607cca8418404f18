#include "actors/net/process_nodes.hpp"

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/actor_board.hpp"
#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/inspect_board.hpp"
#include "actors/net/network.hpp"
#include "actors/net/stage_proxy.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/plan/planner.hpp"
#include "actors/run_controls.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

void remove_member(std::vector<process_member>& members, int id) {
  members.erase(std::remove_if(members.begin(), members.end(),
                               [&](const process_member& m) { return m.id == id; }),
                members.end());
}

bool await_members(caf::scoped_actor& self, std::vector<process_member>& members,
                   int count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto logger = log::get("bamboo.gateway");
  while (static_cast<int>(members.size()) < count) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return false;
    self->receive(
        [&](joined_atom, int id, caf::actor agent, std::string& zone) {
          members.push_back({id, std::move(agent), std::move(zone)});
          logger->info("{} of {} workers are here", members.size(), count);
        },
        [&](lost_atom, int id) { remove_member(members, id); },
        caf::after(left) >> [] {});
  }
  return true;
}

namespace {

// Nodes as worker processes behind proxies: shadows sync through the
// transport, a generation ends with a frame to every worker, and a new shadow
// gets its owner's state through the transport.
class process_nodes : public node_backend {
public:
  process_nodes(train_config cfg, std::vector<process_member> members, caf::actor gateway,
                std::size_t frame_limit, std::uint64_t generation, std::string resume)
      : cfg_(std::move(cfg)), members_(std::move(members)), gateway_(std::move(gateway)),
        frame_limit_(frame_limit), generation_(generation), resume_(std::move(resume)) {}

  node_handles spawn(caf::local_actor* manager, const node_assignment& a) override {
    node_handles h;
    h.group = std::make_shared<node_group>();
    // On the wire (and to the proxies) stages are named p*S+s.
    const int first = a.pipeline * cfg_.stages;
    const int stage = first + a.stage;
    const int shadow = a.shadow_stage < 0 ? -1 : first + a.shadow_stage;
    auto ps = proxy_spec(a.node, schema::target::stage, stage);
    ps.assign = schema::assign{static_cast<std::uint32_t>(a.node),
                               static_cast<std::uint32_t>(stage),
                               shadow,
                               generation_,
                               to_settings(cfg_),
                               resume_};
    h.stage = spawn_stage_proxy(manager, ps);
    if (shadow >= 0)
      h.shadow =
          spawn_stage_proxy(manager, proxy_spec(a.node, schema::target::shadow, shadow));
    return h;
  }
  shadow_sync sync() const override { return shadow_sync::transport; }
  void end_generation(std::uint64_t gen, const std::string& reason) override {
    send_from_this_process(
        gateway_.home_system(), gateway_,
        caf::make_message(broadcast_atom::value,
                          to_wire(schema::generation_end{gen, reason})));
  }
  shadow_source reshadowing() const override { return shadow_source::copy; }
  int node_id(int node) const override {
    return members_.at(static_cast<std::size_t>(node)).id;
  }
  stage_actor add_shadow(caf::local_actor*, int, std::shared_ptr<node_group>,
                         const replica_handle&) override {
    return {};
  }
  // The worker creates the replica on the first frame for its target.
  stage_actor add_empty_shadow(caf::local_actor* manager, int node, int stage) override {
    return spawn_stage_proxy(manager,
                             proxy_spec(node, schema::added_replica(stage), stage));
  }

private:
  stage_proxy_spec proxy_spec(int node, schema::target t, int stage) const {
    const auto& m = members_.at(static_cast<std::size_t>(node));
    stage_proxy_spec ps;
    ps.agent = m.agent;
    ps.gateway = gateway_;
    ps.member = m.id;
    ps.node = node;
    ps.frame_limit = frame_limit_;
    ps.target = t;
    ps.stage = stage;
    ps.generation = generation_;
    return ps;
  }

  train_config cfg_;
  std::vector<process_member> members_;
  caf::actor gateway_;
  std::size_t frame_limit_;
  std::uint64_t generation_;
  std::string resume_; // the checkpoint's step directory, or empty
};

} // namespace

std::shared_ptr<node_backend>
make_process_nodes(train_config cfg, std::vector<process_member> members,
                   caf::actor gateway, std::size_t frame_limit, std::uint64_t generation,
                   std::string resume) {
  return std::make_shared<process_nodes>(std::move(cfg), std::move(members),
                                         std::move(gateway), frame_limit, generation,
                                         std::move(resume));
}

// Joins and losses the gateway told of while the manager ran.
void update_members(caf::scoped_actor& self, std::vector<process_member>& members) {
  bool more = true;
  while (more)
    self->receive(
        [&](joined_atom, int id, caf::actor agent, std::string& zone) {
          members.push_back({id, std::move(agent), std::move(zone)});
        },
        [&](lost_atom, int id) { remove_member(members, id); },
        caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
}

// The plan's members: the first P x S live ones, pipeline by pipeline, each
// pipeline's placed around its ring so that no stage's replica is in its zone
// where the zones allow it.
std::vector<process_member> plan_members(const std::vector<process_member>& live,
                                         int pipelines, int stages) {
  std::vector<process_member> out;
  std::string placed;
  int shared = 0;
  bool one_zone = true;
  for (int p = 0; p < pipelines; ++p) {
    const std::vector<process_member> first(live.begin() + p * stages,
                                            live.begin() + (p + 1) * stages);
    std::vector<std::string> zones;
    for (const auto& m : first) {
      zones.push_back(m.zone);
      one_zone = one_zone && m.zone == live.front().zone;
    }
    const auto ring = zone_ring(zones);
    shared += same_zone_neighbours(zones, ring);
    for (int i : ring) {
      placed += (out.empty() ? "" : ", ") + std::string("stage ") +
                std::to_string(out.size()) + " on node " + std::to_string(first[i].id) +
                " (zone " + first[i].zone + ")";
      out.push_back(first[i]);
    }
  }
  // One zone (the default for all): nothing to place, nothing to say.
  if (one_zone)
    return out;
  auto logger = log::get("bamboo.manager");
  if (shared > 0)
    logger->warn("{} stage(s) have their replica in their own zone: too many nodes in "
                 "one zone",
                 shared);
  logger->info("placed by zone: {}", placed);
  return out;
}

} // namespace bamboo
