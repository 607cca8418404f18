#include "actors/net/assignment.hpp"

#include "actors/errors.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/resume_point.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"

namespace bamboo {

caf::expected<assignment_inputs> take_assignment(const schema::assign& a) {
  std::string problem;
  auto cfg = from_settings(a.config, problem);
  if (!cfg)
    return make_error(errc::invalid_config, problem);
  assignment_inputs in;
  in.cfg = *cfg;
  in.parts = partition(layer_costs(cfg->model), cfg->stages);
  const auto stages = static_cast<std::int64_t>(in.parts.size());
  if (static_cast<std::int64_t>(a.stage) >= stages || a.shadow_stage >= stages ||
      a.shadow_stage < -1)
    return make_error(errc::invalid_config,
                      "stage " + std::to_string(a.stage) + " (replica " +
                          std::to_string(a.shadow_stage) + ") of a run of " +
                          std::to_string(stages) + " stages");
  in.corpus = token_corpus::load(cfg->data, cfg->model, cfg->seed, problem);
  if (!in.corpus)
    return make_error(errc::invalid_config, problem);
  if (!a.resume.empty()) {
    auto at = checkpoint_at(*cfg, a.resume);
    if (!at)
      return at.error();
    in.resume = *at;
  }
  in.node.node = static_cast<int>(a.node);
  in.node.stage = static_cast<int>(a.stage);
  in.node.range = in.parts.at(a.stage);
  in.node.shadow_stage = a.shadow_stage;
  if (a.shadow_stage >= 0)
    in.node.shadow_range = in.parts.at(static_cast<std::size_t>(a.shadow_stage));
  return in;
}

} // namespace bamboo
