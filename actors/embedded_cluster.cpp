#include "actors/embedded_cluster.hpp"

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/schedule.hpp"

namespace bamboo {

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

  caf::actor_system_config sys_cfg;
  register_errors(sys_cfg);
  register_messages(sys_cfg);
  caf::actor_system sys{sys_cfg};

  manager_spec spec;
  spec.cfg = cfg;
  spec.parts = partition(layer_costs(cfg.model), cfg.stages);
  spec.corpus = corpus;
  auto kills = opts.preemptions;
  const int ops = static_cast<int>(
      make_schedule(0, cfg.stages, cfg.micro_batches(), cfg.redundancy).size());
  for (const auto& k :
       poisson_kills(opts.preempt_rate, cfg.steps, cfg.stages, ops, cfg.seed))
    kills.push_back(k);
  if (!kills.empty())
    spec.injector = std::make_shared<preemption_injector>(std::move(kills));
  spec.heartbeat_period = opts.heartbeat_period;
  try {
    spec.transports = std::make_shared<transport_registry>(opts.transport, cfg.stages);
  } catch (const std::exception& e) {
    return make_error(errc::transport_failure, std::string("transport: ") + e.what());
  }
  spec.heartbeat_misses = opts.heartbeat_misses;
  spec.collect_parameters = opts.collect_parameters;
  spec.on_step = opts.on_step;
  spec.result = std::make_shared<run_result>();
  auto manager = spawn_manager(sys, spec);

  caf::error failure;
  {
    caf::scoped_actor self{sys};
    self->request(manager, caf::infinite, train_atom::value)
        .receive([](done_atom) {}, [&](caf::error& err) { failure = std::move(err); });
  }
  if (failure)
    return failure;
  return std::move(*spec.result);
}

} // namespace bamboo
