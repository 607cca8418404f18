#include "actors/embedded_cluster.hpp"

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "transport/local_transport.hpp"

namespace bamboo {

caf::expected<run_result> run_embedded(const train_config& cfg, const run_options& opts) {
  if (auto problem = validate(cfg))
    return make_error(errc::invalid_config, *problem);
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
  spec.hub = std::make_shared<local_hub>(cfg.stages, /*generation=*/1);
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
