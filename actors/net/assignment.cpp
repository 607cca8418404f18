#include "actors/net/assignment.hpp"

#include "actors/errors.hpp"
#include "actors/net/wire_values.hpp"
#include "actors/resume_point.hpp"
#include "model/checkpoint.hpp"
#include "model/data.hpp"
#include "model/model.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

caf::expected<assignment_inputs>
take_assignment(const schema::assign& a,
                const std::shared_ptr<const model_definition>& local_model) {
  std::string problem;
  auto cfg = from_settings(a.config, problem, local_model);
  if (!cfg)
    return make_error(errc::invalid_config, problem);
  assignment_inputs in;
  in.cfg = *cfg;
  if (!cfg->custom_model) { // a custom model brings its own data
    in.corpus = token_corpus::load(cfg->data, cfg->model, cfg->seed, problem);
    if (!in.corpus)
      return make_error(errc::invalid_config, problem);
  }
  in.parts = partition(model_of(*cfg, in.corpus)->layer_costs(), cfg->stages);
  // Stages are named p*S+s across pipelines (just s with one); the replica is
  // of the same pipeline.
  const std::int64_t stages = static_cast<std::int64_t>(in.parts.size());
  const std::int64_t named = stages * cfg->pipelines;
  const std::int64_t c = a.stage, r = a.shadow_stage;
  if (c >= named || r >= named || r < -1 || (r >= 0 && r / stages != c / stages))
    return make_error(errc::invalid_config,
                      "stage " + std::to_string(a.stage) + " (replica " +
                          std::to_string(a.shadow_stage) + ") of a run of " +
                          std::to_string(stages) + " stages" +
                          (cfg->pipelines > 1
                               ? " in " + std::to_string(cfg->pipelines) + " pipelines"
                               : std::string()));
  if (!a.resume.empty()) {
    auto at = checkpoint_at(*cfg, a.resume);
    if (!at)
      return at.error();
    in.resume = *at;
  }
  in.node.node = static_cast<int>(a.node);
  in.node.pipeline = static_cast<int>(c / stages);
  in.node.stage = static_cast<int>(c % stages);
  in.node.range = in.parts.at(static_cast<std::size_t>(in.node.stage));
  in.node.shadow_stage = r < 0 ? -1 : static_cast<int>(r % stages);
  if (r >= 0)
    in.node.shadow_range = in.parts.at(static_cast<std::size_t>(in.node.shadow_stage));
  return in;
}

} // namespace bamboo
