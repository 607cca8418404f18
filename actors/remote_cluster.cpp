#include "actors/remote_cluster.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/errors.hpp"
#include "actors/frame_channel.hpp"
#include "actors/gateway.hpp"
#include "actors/remote_stage.hpp"
#include "actors/wire_values.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "transport/gloo_transport.hpp"
#include "transport/log.hpp"

namespace bamboo {

namespace {

struct member {
  int id = 0;
  caf::actor agent;
};

// Waits until `count` workers joined (and are still there).
caf::expected<std::vector<member>> await_members(caf::scoped_actor& self, int count,
                                                 std::chrono::milliseconds timeout) {
  std::vector<member> members;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto logger = log::get("bamboo.manager");
  while (static_cast<int>(members.size()) < count) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return make_error(errc::node_lost, std::to_string(members.size()) + " of " +
                                             std::to_string(count) +
                                             " workers joined in time");
    self->receive(
        [&](joined_atom, int id, caf::actor agent) {
          members.push_back({id, std::move(agent)});
          logger->info("{} of {} workers are here", members.size(), count);
        },
        [&](lost_atom, int id) {
          members.erase(std::remove_if(members.begin(), members.end(),
                                       [&](const member& m) { return m.id == id; }),
                        members.end());
        },
        caf::after(left) >> [] {});
  }
  return members;
}

node_factory remote_nodes(std::vector<member> members, caf::actor gateway,
                          std::size_t frame_limit) {
  return [members = std::move(members), gateway, frame_limit](caf::local_actor* manager,
                                                              const node_spec& ns) {
    node_handles h;
    h.group = std::make_shared<node_group>();
    const auto& m = members.at(static_cast<std::size_t>(ns.node));
    remote_stage_spec rs;
    rs.agent = m.agent;
    rs.gateway = gateway;
    rs.member = m.id;
    rs.node = ns.node;
    rs.frame_limit = frame_limit;
    rs.target = schema::target::stage;
    rs.assign = schema::assign{static_cast<std::uint32_t>(ns.node),
                               static_cast<std::uint32_t>(ns.stage), ns.shadow_stage, 1,
                               to_settings(ns.cfg)};
    h.stage = spawn_remote_stage(manager, rs);
    if (ns.shadow_stage >= 0) {
      rs.target = schema::target::shadow;
      rs.assign.reset();
      h.shadow = spawn_remote_stage(manager, rs);
    }
    return h;
  };
}

} // namespace

caf::expected<run_result> run_cluster(const train_config& cfg,
                                      const cluster_options& opts) {
  if (auto problem = validate(cfg))
    return make_error(errc::invalid_config, *problem);
  if (cfg.stages < 2)
    return make_error(errc::invalid_config, "a cluster of processes needs 2 or more "
                                            "stages (one worker process each)");
  std::string problem;
  // Every worker loads the data itself; fail here first if it cannot be read.
  if (!token_corpus::load(cfg.data, cfg.model, cfg.seed, problem))
    return make_error(errc::invalid_data, problem);

  caf::actor_system_config sys_cfg;
  sys_cfg.load<caf::io::middleman>();
  register_errors(sys_cfg);
  register_messages(sys_cfg);
  register_frames(sys_cfg);
  caf::actor_system sys{sys_cfg};
  std::unique_ptr<gloo_store_server> store;
  try {
    store = std::make_unique<gloo_store_server>(0, opts.bind);
  } catch (const std::exception& e) {
    return make_error(errc::transport_failure, std::string("store: ") + e.what());
  }
  caf::scoped_actor self{sys};
  gateway_spec gs;
  gs.token = opts.token;
  gs.frame_limit = opts.frame_limit;
  gs.store_port = store->port();
  gs.heartbeat_period = opts.heartbeat_period;
  gs.heartbeat_misses = opts.heartbeat_misses;
  const auto period = opts.heartbeat_period;
  const int misses = opts.heartbeat_misses;
  gs.listener = self;
  auto gateway = spawn_gateway(sys, gs);
  auto stop_gateway = [&] {
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  };
  auto bound = sys.middleman().publish(gateway, opts.port, opts.bind.c_str());
  if (!bound) {
    stop_gateway();
    return make_error(errc::transport_failure, "cannot listen on " + opts.bind + ":" +
                                                   std::to_string(opts.port) + ": " +
                                                   sys.render(bound.error()));
  }
  log::get("bamboo.manager")
      ->info("listening on {}:{} (store {}); waiting for {} workers", opts.bind, *bound,
             store->port(), cfg.stages);
  if (opts.on_listening)
    opts.on_listening(*bound);
  auto members = await_members(self, cfg.stages, opts.join_timeout);
  if (!members) {
    stop_gateway();
    return members.error();
  }

  manager_spec spec;
  spec.cfg = cfg;
  spec.parts = partition(layer_costs(cfg.model), cfg.stages);
  spec.make_node = remote_nodes(std::move(*members), gateway, opts.frame_limit);
  spec.sync_through_transport = true;
  spec.heartbeat_period = period; // the grace for a failed transfer
  spec.heartbeat_misses = misses;
  spec.reshadow = false;
  spec.end_generation = [gateway](std::uint64_t gen, const std::string& reason) {
    caf::anon_send(gateway, broadcast_atom::value,
                   to_wire(schema::generation_end{gen, reason}));
  };
  spec.on_step = opts.on_step;
  spec.result = std::make_shared<run_result>();
  auto manager = spawn_manager(sys, spec);
  caf::error failure;
  self->request(manager, caf::infinite, train_atom::value)
      .receive([](done_atom) {}, [&](caf::error& err) { failure = std::move(err); });
  // Let the workers' leave frames go out before the connections close.
  self->receive(caf::after(std::chrono::milliseconds(100)) >> [] {});
  stop_gateway();
  if (failure)
    return failure;
  return std::move(*spec.result);
}

} // namespace bamboo
