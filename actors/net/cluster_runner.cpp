#include "actors/net/cluster_runner.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/network.hpp"
#include "actors/net/stage_proxy.hpp"
#include "actors/net/wire_values.hpp"
#include "log/log.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "transport/gloo_transport.hpp"

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
  auto logger = log::get("bamboo.gateway");
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

// Nodes as worker processes behind proxies: shadows sync through the
// transport, a generation ends with a frame to every worker, and a new shadow
// gets its owner's state through the transport.
class process_nodes : public node_backend {
public:
  process_nodes(train_config cfg, std::vector<member> members, caf::actor gateway,
                std::size_t frame_limit)
      : cfg_(std::move(cfg)), members_(std::move(members)), gateway_(std::move(gateway)),
        frame_limit_(frame_limit) {}

  node_handles spawn(caf::local_actor* manager, const node_assignment& a) override {
    node_handles h;
    h.group = std::make_shared<node_group>();
    auto ps = proxy_spec(a.node, schema::target::stage);
    ps.assign = schema::assign{static_cast<std::uint32_t>(a.node),
                               static_cast<std::uint32_t>(a.stage), a.shadow_stage, 1,
                               to_settings(cfg_)};
    h.stage = spawn_stage_proxy(manager, ps);
    if (a.shadow_stage >= 0)
      h.shadow = spawn_stage_proxy(manager, proxy_spec(a.node, schema::target::shadow));
    return h;
  }
  shadow_sync sync() const override { return shadow_sync::transport; }
  void end_generation(std::uint64_t gen, const std::string& reason) override {
    caf::anon_send(gateway_, broadcast_atom::value,
                   to_wire(schema::generation_end{gen, reason}));
  }
  shadow_source reshadowing() const override { return shadow_source::copy; }
  stage_actor add_shadow(caf::local_actor*, int, std::shared_ptr<node_group>,
                         const replica_handle&) override {
    return {};
  }
  // The worker creates the replica on the first frame for its target.
  stage_actor add_empty_shadow(caf::local_actor* manager, int node, int stage) override {
    return spawn_stage_proxy(manager, proxy_spec(node, schema::added_replica(stage)));
  }

private:
  stage_proxy_spec proxy_spec(int node, schema::target t) const {
    const auto& m = members_.at(static_cast<std::size_t>(node));
    stage_proxy_spec ps;
    ps.agent = m.agent;
    ps.gateway = gateway_;
    ps.member = m.id;
    ps.node = node;
    ps.frame_limit = frame_limit_;
    ps.target = t;
    return ps;
  }

  train_config cfg_;
  std::vector<member> members_;
  caf::actor gateway_;
  std::size_t frame_limit_;
};

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
  configure_network(sys_cfg);
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
  gs.heartbeats = opts.heartbeats;
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
  log::get("bamboo.gateway")
      ->info("listening on {}:{} (store {}); waiting for {} workers", opts.bind, *bound,
             store->port(), cfg.stages);
  if (opts.on_listening)
    opts.on_listening(*bound);
  auto members = await_members(self, cfg.stages, opts.join_timeout);
  if (!members) {
    stop_gateway();
    return members.error();
  }

  auto nodes = std::make_shared<process_nodes>(cfg, std::move(*members), gateway,
                                               opts.frame_limit);
  manager_spec spec;
  spec.cfg = cfg;
  spec.parts = partition(layer_costs(cfg.model), cfg.stages);
  spec.nodes = nodes;
  spec.heartbeats = opts.heartbeats; // the grace for a failed transfer
  spec.on_step = opts.on_step;
  spec.collect_digests = opts.collect_digests;
  spec.result = std::make_shared<run_result>();
  if (opts.on_started)
    opts.on_started();
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
