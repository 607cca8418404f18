#include "model/stage_executor.hpp"

#include "transport/log.hpp"

namespace bamboo {

stage_executor::stage_executor(const train_config& cfg, int stage, stage_range range,
                               std::shared_ptr<const token_corpus> corpus)
  : cfg_(cfg),
    stage_(stage),
    range_(range),
    corpus_(std::move(corpus)),
    order_(cfg.seed, sample_count(*corpus_, cfg.model)),
    layers_(build_layers(cfg.model, cfg.seed, range.first, range.last)) {
  std::vector<named_tensor> params;
  for (const auto& layer : layers_)
    for (const auto& p : layer->params())
      params.push_back({"layers." + std::to_string(layer->index()) + "." + p.name,
                        p.tensor});
  opt_ = std::make_unique<adamw>(std::move(params), cfg.optim, cfg.steps);
}

transport_status stage_executor::forward(std::int64_t k, int j, tensor_transport& t,
                                         step_outcome& out) {
  const layer_ctx ctx{cfg_.seed, k, j, true};
  micro_batch mb;
  if (is_first() || is_last())
    mb = make_micro_batch(cfg_, *corpus_, order_, k, j);
  in_flight f;
  at::Tensor x;
  if (is_first()) {
    x = mb.input;
  } else {
    at::Tensor received;
    auto st = t.recv(stage_ - 1, make_tag(k, j, tensor_kind::activation), received);
    if (!st)
      return st;
    // A fresh leaf: its .grad is what we send back to stage s-1.
    x = received.detach().requires_grad_(true);
    f.input = x;
  }
  for (auto& layer : layers_)
    x = layer->forward(x, ctx);
  ++out.forwards;
  if (is_last()) {
    auto loss = compute_loss(x, mb.target);
    out.loss_sum += loss.item<double>();
    f.output = loss;
  } else {
    auto st = t.send(stage_ + 1, make_tag(k, j, tensor_kind::activation), x.detach());
    if (!st)
      return st;
    f.output = x;
  }
  pending_[j] = std::move(f);
  return {};
}

transport_status stage_executor::backward(std::int64_t k, int j, tensor_transport& t) {
  auto it = pending_.find(j);
  if (it == pending_.end())
    return {transport_errc::invalid, "backward of micro-batch " + std::to_string(j) +
                                       " before its forward"};
  auto& f = it->second;
  if (is_last()) {
    (f.output / static_cast<double>(cfg_.micro_batches())).backward();
  } else {
    at::Tensor grad;
    auto st = t.recv(stage_ + 1, make_tag(k, j, tensor_kind::gradient), grad);
    if (!st)
      return st;
    f.output.backward(grad);
  }
  if (!is_first()) {
    auto st = t.send(stage_ - 1, make_tag(k, j, tensor_kind::gradient), f.input.grad());
    if (!st)
      return st;
  }
  pending_.erase(it);
  return {};
}

step_outcome stage_executor::run_step(std::int64_t k, const std::vector<instruction>& ops,
                                      tensor_transport& t) {
  static auto logger = log::get("bamboo.stage");
  step_outcome out;
  opt_->zero_grad();
  pending_.clear();
  for (const auto& op : ops) {
    logger->debug("stage {} step {}: {}{}", stage_, k,
                  op.kind == op_kind::forward ? 'F' : 'B', op.micro_batch);
    out.status = op.kind == op_kind::forward ? forward(k, op.micro_batch, t, out)
                                             : backward(k, op.micro_batch, t);
    if (!out.status) {
      pending_.clear();
      return out;
    }
    if (op.kind == op_kind::backward)
      ++out.backwards;
  }
  out.grad_squares = opt_->grad_squares();
  return out;
}

void stage_executor::apply_update(std::int64_t k, double clip_coef) {
  opt_->step(k, clip_coef);
}

} // namespace bamboo
