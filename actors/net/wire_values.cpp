#include "actors/net/wire_values.hpp"

#include "actors/protocol.hpp"
#include "model/model_definition.hpp"

namespace bamboo {

schema::train_settings to_settings(const train_config& cfg) {
  schema::train_settings s;
  const auto& m = cfg.model;
  const auto& o = cfg.optim;
  auto u = [](int v) { return static_cast<std::uint32_t>(v); };
  s.model = cfg.custom_model ? cfg.custom_model->name() : to_string(m.kind);
  if (cfg.custom_model)
    s.model_digest = model_digest(*cfg.custom_model);
  s.layers = u(m.layers);
  s.d_model = u(m.d_model);
  s.heads = u(m.heads);
  s.seq_len = u(m.seq_len);
  s.vocab = u(m.vocab);
  s.mlp_ratio = u(m.mlp_ratio);
  s.dropout = m.dropout;
  s.lr = o.lr;
  s.min_lr_ratio = o.min_lr_ratio;
  s.warmup_steps = u(o.warmup_steps);
  s.beta1 = o.beta1;
  s.beta2 = o.beta2;
  s.eps = o.eps;
  s.weight_decay = o.weight_decay;
  s.clip_norm = o.clip_norm;
  s.stages = u(cfg.stages);
  s.micro_batch = u(cfg.micro_batch);
  s.global_batch = u(cfg.global_batch);
  s.steps = u(cfg.steps);
  s.seed = cfg.seed;
  s.data = cfg.data;
  s.threads = u(cfg.threads);
  s.redundancy = to_string(cfg.redundancy);
  s.pipelines = u(cfg.pipelines);
  return s;
}

std::optional<std::string>
model_mismatch(const std::shared_ptr<const model_definition>& run,
               const std::string& worker_model, const std::string& worker_digest) {
  if (!run)
    return std::nullopt; // every worker builds GPT and BERT
  const auto name = run->name();
  const auto digest = model_digest(*run);
  if (worker_model.empty())
    return "model '" + name +
           "' is not registered on this worker (it builds gpt and "
           "bert only: start the trainer's own program as the worker)";
  if (worker_model != name)
    return "model '" + name + "' is not registered on this worker (its model is '" +
           worker_model + "')";
  if (worker_digest != digest)
    return "model '" + name + "' is built differently on this worker (digest " +
           worker_digest + ", the manager's " + digest + ")";
  return std::nullopt;
}

std::optional<train_config>
from_settings(const schema::train_settings& s, std::string& problem,
              const std::shared_ptr<const model_definition>& local) {
  train_config cfg;
  auto& m = cfg.model;
  auto& o = cfg.optim;
  auto i = [](std::uint32_t v) { return static_cast<int>(v); };
  if (s.model == "gpt" && s.model_digest.empty())
    m.kind = model_kind::gpt;
  else if (s.model == "bert" && s.model_digest.empty())
    m.kind = model_kind::bert;
  else if (local && local->name() == s.model && model_digest(*local) == s.model_digest)
    cfg.custom_model = local;
  else {
    problem = local && local->name() == s.model
                  ? "model '" + s.model +
                        "' is built differently on this worker (digest " +
                        model_digest(*local) + ", the manager's " + s.model_digest + ")"
                  : "model '" + s.model + "' is not registered on this worker";
    return std::nullopt;
  }
  if (s.redundancy == "off")
    cfg.redundancy = redundancy_mode::off;
  else if (s.redundancy == "lazy")
    cfg.redundancy = redundancy_mode::lazy;
  else if (s.redundancy == "eager")
    cfg.redundancy = redundancy_mode::eager;
  else {
    problem = "unknown redundancy mode '" + s.redundancy + "'";
    return std::nullopt;
  }
  m.layers = i(s.layers);
  m.d_model = i(s.d_model);
  m.heads = i(s.heads);
  m.seq_len = i(s.seq_len);
  m.vocab = i(s.vocab);
  m.mlp_ratio = i(s.mlp_ratio);
  m.dropout = s.dropout;
  o.lr = s.lr;
  o.min_lr_ratio = s.min_lr_ratio;
  o.warmup_steps = i(s.warmup_steps);
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.eps = s.eps;
  o.weight_decay = s.weight_decay;
  o.clip_norm = s.clip_norm;
  cfg.stages = i(s.stages);
  cfg.micro_batch = i(s.micro_batch);
  cfg.global_batch = i(s.global_batch);
  cfg.steps = i(s.steps);
  cfg.seed = s.seed;
  cfg.data = s.data;
  cfg.threads = i(s.threads);
  cfg.pipelines = i(s.pipelines);
  if (auto bad = validate(cfg)) {
    problem = *bad;
    return std::nullopt;
  }
  return cfg;
}

namespace {

std::vector<std::uint32_t> to_u32(const std::vector<int>& v) {
  return {v.begin(), v.end()};
}
std::vector<int> to_int(const std::vector<std::uint32_t>& v) {
  return {v.begin(), v.end()};
}

} // namespace

schema::progress_report to_frame(const stage_progress& p, std::uint64_t request) {
  schema::progress_report out;
  out.request = request;
  out.stage = static_cast<std::uint32_t>(p.stage);
  out.step = p.step;
  out.forwards = to_u32(p.forwards);
  out.backwards = to_u32(p.backwards);
  out.frc = to_u32(p.frc);
  out.complete = p.complete;
  out.report = p.report;
  return out;
}

stage_progress from_frame(const schema::progress_report& p) {
  stage_progress m;
  m.stage = static_cast<int>(p.stage);
  m.step = p.step;
  m.forwards = to_int(p.forwards);
  m.backwards = to_int(p.backwards);
  m.frc = to_int(p.frc);
  m.complete = p.complete;
  m.report = p.report;
  return m;
}

schema::resume to_frame(const resume_order& o) {
  return {o.generation,
          static_cast<std::uint64_t>(o.step),
          to_u32(o.resend_activations),
          to_u32(o.resend_gradients),
          to_u32(o.delivered_activations),
          to_u32(o.delivered_gradients),
          o.frc_enabled,
          o.sum_source,
          to_u32(o.sum_targets)};
}

resume_order from_frame(const schema::resume& r) {
  resume_order o;
  o.generation = r.generation;
  o.step = static_cast<std::int64_t>(r.step);
  o.resend_activations = to_int(r.resend_activations);
  o.resend_gradients = to_int(r.resend_gradients);
  o.delivered_activations = to_int(r.delivered_activations);
  o.delivered_gradients = to_int(r.delivered_gradients);
  o.frc_enabled = r.frc_enabled;
  o.sum_source = r.sum_source;
  o.sum_targets = to_int(r.sum_targets);
  return o;
}

} // namespace bamboo
