#include "model/config.hpp"

namespace bamboo {

const char* to_string(model_kind k) {
  return k == model_kind::gpt ? "gpt" : "bert";
}

const char* to_string(redundancy_mode m) {
  switch (m) {
  case redundancy_mode::off: return "off";
  case redundancy_mode::lazy: return "lazy";
  case redundancy_mode::eager: return "eager";
  }
  return "unknown";
}

std::optional<std::string> validate(const train_config& c) {
  const auto& m = c.model;
  auto num = [](auto v) { return std::to_string(v); };
  // 0 blocks is an embedding and a head: almost no compute between stages
  // whose activations are large (a transport workload).
  if (m.layers < 0)
    return "--layers must not be negative, got " + num(m.layers);
  if (m.d_model < 1 || m.heads < 1)
    return "--d-model and --heads must be positive";
  if (m.d_model % m.heads != 0)
    return "--heads " + num(m.heads) + " does not divide --d-model " + num(m.d_model);
  if (m.seq_len < 2)
    return "--seq-len must be at least 2, got " + num(m.seq_len);
  if (m.vocab < 2 || m.vocab > 65535)
    return "--vocab must be in [2, 65535], got " + num(m.vocab);
  if (m.dropout < 0 || m.dropout >= 1)
    return "--dropout must be in [0, 1), got " + std::to_string(m.dropout);
  if (c.stages < 1)
    return "--stages must be at least 1, got " + num(c.stages);
  // (A custom model's layers are counted by check_model.)
  if (!c.custom_model && c.stages > m.pipeline_layers())
    return "--stages " + num(c.stages) + " exceeds the model's " +
           num(m.pipeline_layers()) + " pipeline layers (" + num(m.layers) +
           " blocks + embedding + head)";
  if (c.micro_batch < 1)
    return "--micro-batch must be at least 1, got " + num(c.micro_batch);
  if (c.global_batch < 1 || c.global_batch % c.micro_batch != 0)
    return "--global-batch " + num(c.global_batch) +
           " is not a positive multiple of --micro-batch " + num(c.micro_batch);
  if (c.micro_batches() > max_micro_batches)
    return "--global-batch / --micro-batch is " + num(c.micro_batches()) +
           " micro-batches per step: at most " + num(max_micro_batches) +
           " are supported (raise --micro-batch)";
  if (c.pipelines < 1)
    return "--pipelines must be at least 1, got " + num(c.pipelines);
  if (c.micro_batches() % c.pipelines != 0)
    return "--global-batch / --micro-batch is " + num(c.micro_batches()) +
           " micro-batches per step, which " + num(c.pipelines) +
           " pipelines cannot share equally";
  if (c.steps < 0)
    return "--steps must not be negative";
  if (c.threads < 1)
    return "--threads must be at least 1, got " + num(c.threads);
  if (c.optim.lr <= 0)
    return "--lr must be positive";
  if (c.optim.clip_norm < 0)
    return "--clip must not be negative";
  return std::nullopt;
}

} // namespace bamboo
