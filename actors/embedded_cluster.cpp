#include "actors/embedded_cluster.hpp"

#include <caf/all.hpp>

#include "actors/cluster_manager.hpp"
#include "actors/errors.hpp"
#include "actors/resume_point.hpp"
#include "actors/stage_actor.hpp"
#include "actors/system.hpp"
#include "log/log.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/schedule.hpp"
#include "model/stage_executor.hpp"

namespace bamboo {

namespace {

// Nodes as actors of this process: shadows get gradients by hand-off, a
// generation ends by aborting its transport group, clones make new shadows.
class local_nodes : public node_backend {
public:
  explicit local_nodes(node_resources r) : r_(std::move(r)) {}

  node_handles spawn(caf::local_actor* manager, const node_assignment& a) override {
    return spawn_node(manager, a, r_);
  }
  shadow_sync sync() const override { return r_.sync; }
  void end_generation(std::uint64_t gen, const std::string& reason) override {
    r_.transports->abort(gen, reason);
  }
  stage_actor add_shadow(caf::local_actor* manager, int node,
                         std::shared_ptr<node_group> group,
                         const replica_handle& replica) override {
    stage_actor_spec sh;
    sh.cfg = r_.cfg;
    sh.node = node;
    sh.executor = replica.executor;
    sh.injector = r_.injector;
    sh.transports = r_.transports;
    sh.sync = r_.sync;
    sh.group = group;
    auto actor = spawn_shadow_actor(manager, std::move(sh));
    group->add(actor);
    return actor;
  }
  shadow_source reshadowing() const override { return shadow_source::clone; }
  stage_actor add_empty_shadow(caf::local_actor*, int, int) override { return {}; }

private:
  node_resources r_;
};

} // namespace

caf::expected<run_result> run_embedded(const train_config& cfg, const run_options& opts) {
  if (auto problem = validate(cfg))
    return make_error(errc::invalid_config, *problem);
  for (const auto& p : opts.preemptions)
    if (p.node < 0 || p.node >= cfg.stages)
      return make_error(errc::invalid_config,
                        "--preempt names node " + std::to_string(p.node) +
                            ", but there are " + std::to_string(cfg.stages) +
                            " nodes (0.." + std::to_string(cfg.stages - 1) + ")");
  if (opts.preempt_rate < 0)
    return make_error(errc::invalid_config, "--preempt rate must not be negative");
  std::string problem;
  auto corpus = token_corpus::load(cfg.data, cfg.model, cfg.seed, problem);
  if (!corpus)
    return make_error(errc::invalid_data, problem);

  const auto& ck = opts.checkpoints;
  if (auto problem = check(ck))
    return make_error(errc::invalid_config, *problem);
  std::shared_ptr<const checkpoint> resume;
  if (ck.resume) {
    auto r = resume_point(cfg, ck.dir, corpus, "--resume");
    if (!r)
      return r.error();
    resume = *r;
  }
  std::shared_ptr<checkpoint_writer> writer;
  if (ck.every > 0)
    writer = std::make_shared<checkpoint_writer>(ck.dir, ck.keep);

  caf::actor_system_config sys_cfg;
  configure(sys_cfg);
  caf::actor_system sys{sys_cfg};

  node_resources res;
  res.cfg = cfg;
  res.corpus = corpus;
  res.heartbeat_period = opts.heartbeats.period;
  res.resume = resume;
  auto kills = opts.preemptions;
  const int ops = static_cast<int>(
      make_schedule(0, cfg.stages, cfg.micro_batches(), cfg.redundancy).size());
  for (const auto& k :
       poisson_kills(opts.preempt_rate, cfg.steps, cfg.stages, ops, cfg.seed))
    kills.push_back(k);
  if (!kills.empty())
    res.injector = std::make_shared<preemption_injector>(std::move(kills));
  try {
    res.transports = std::make_shared<transport_registry>(opts.transport, cfg.stages);
  } catch (const std::exception& e) {
    return make_error(errc::transport_failure, std::string("transport: ") + e.what());
  }

  manager_spec spec;
  spec.cfg = cfg;
  spec.parts = partition(layer_costs(cfg.model), cfg.stages);
  spec.injector = res.injector;
  spec.nodes = std::make_shared<local_nodes>(std::move(res));
  spec.heartbeats = opts.heartbeats;
  spec.collect_parameters = opts.collect_parameters;
  spec.collect_digests = opts.collect_digests;
  spec.on_step = opts.on_step;
  spec.result = std::make_shared<run_result>();
  spec.first_step = resume ? resume->step : 0;
  spec.checkpoints = writer;
  spec.checkpoint_every = ck.every;
  auto manager = spawn_manager(sys, spec);

  caf::error failure;
  {
    caf::scoped_actor self{sys};
    self->request(manager, caf::infinite, train_atom::value)
        .receive([](done_atom) {}, [&](caf::error& err) { failure = std::move(err); });
  }
  // The last checkpoints are on disk before the run says it is done.
  if (writer)
    spec.result->checkpoint_failures = writer->finish();
  if (failure)
    return failure;
  return std::move(*spec.result);
}

} // namespace bamboo
