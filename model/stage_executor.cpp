#include "model/stage_executor.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "model/checkpoint.hpp"
#include "model/frc_worker.hpp"

#include "log/log.hpp"

namespace bamboo {

stage_executor::stage_executor(const train_config& cfg, int stage, stage_range range,
                               std::shared_ptr<const token_corpus> corpus, int pipeline)
    : cfg_(cfg), stage_(stage), pipeline_(pipeline), range_(range),
      corpus_(std::move(corpus)), model_(model_of(cfg, corpus_)),
      order_(cfg.seed, model_->samples()),
      layers_(model_->build_layers(cfg.seed, range.first, range.last)) {
  std::vector<named_tensor> params;
  for (const auto& layer : layers_)
    for (const auto& p : layer->params())
      params.push_back(
          {"layers." + std::to_string(layer->index()) + "." + p.name, p.tensor});
  opt_ = std::make_unique<adamw>(std::move(params), cfg.optim, cfg.steps);
}

stage_executor::~stage_executor() = default;

void stage_executor::begin_step(std::int64_t k) {
  if (progress_.step == k)
    return;
  opt_->zero_grad();
  progress_ = step_progress{};
  progress_.step = k;
  next_op_ = 0;
  pending_.clear();
  sent_act_.clear();
  sent_grad_.clear();
  losses_.clear();
  delivered_act_.clear();
  delivered_grad_.clear();
  frc_queued_.clear();
  local_grads_ = at::Tensor();
  sum_ = at::Tensor();
  sum_source_ = -1;
}

at::Tensor stage_executor::recv_buffer(const tensor_transport& t, int layer) const {
  // Network backends receive into a buffer of the tensor that enters `layer`
  // (an activation, or the gradient of one).
  if (!t.needs_buffer())
    return {};
  const auto spec = model_->boundary(layer, cfg_.micro_batch);
  return at::empty(spec.shape, spec.dtype);
}

micro_batch stage_executor::batch(std::int64_t k, int j) {
  // Global positions [k*G + j*m, + m) of the sample order, j numbered in the step.
  std::vector<std::int64_t> samples(static_cast<std::size_t>(cfg_.micro_batch));
  const std::int64_t base = k * static_cast<std::int64_t>(cfg_.global_batch) +
                            std::int64_t{j} * cfg_.micro_batch;
  for (int i = 0; i < cfg_.micro_batch; ++i)
    samples[static_cast<std::size_t>(i)] = order_.at(base + i);
  return model_->make_batch(samples, cfg_.seed, k, j);
}

at::Tensor stage_executor::run_layers(std::int64_t k, int j, at::Tensor x,
                                      const std::atomic<bool>* stop) {
  const layer_ctx ctx{cfg_.seed, k, global_micro_batch(j), true, stop};
  for (auto& layer : layers_) {
    if (ctx.stop_requested())
      return {};
    x = layer->forward(x, ctx);
    if (!x.defined()) // the layer saw the stop
      return x;
  }
  return x;
}

transport_status stage_executor::forward(std::int64_t k, int j, tensor_transport& t) {
  if (pending_.count(j) == 0) { // else inherited from FRC: only the send remains
    micro_batch mb;
    if (is_first() || is_last()) {
      RECORD_FUNCTION("bamboo::batch assembly", std::vector<c10::IValue>());
      mb = batch(k, global_micro_batch(j));
    }
    in_flight f;
    at::Tensor x;
    if (is_first()) {
      x = mb.input;
    } else {
      at::Tensor received = recv_buffer(t, range_.first);
      auto st =
          t.recv(rank_of(stage_ - 1), make_tag(k, j, tensor_kind::activation), received);
      if (!st) { // say what was being received: a test tells mid-transfer losses by it
        st.detail = "receiving activation " + std::to_string(j) + ": " + st.detail;
        return st;
      }
      // A fresh leaf: its .grad is what we send back to stage s-1.
      x = received.detach().requires_grad_(true);
      f.input = x;
    }
    x = run_layers(k, j, x);
    if (is_last()) {
      f.output = model_->loss(x, mb.target);
      losses_[j] = f.output.item<double>();
    } else {
      f.output = x;
    }
    pending_[j] = std::move(f);
    progress_.forwards.insert(j);
  } else if (is_last()) {
    losses_[j] = pending_[j].output.item<double>();
  }
  if (is_last() || delivered_act_.count(j))
    return {};
  auto act = pending_[j].output.detach();
  sent_act_[j] = act;
  log::get("bamboo.stage")
      ->debug("stage {} step {}: sending activation {} to stage {} ({} bytes)", stage_, k,
              j, stage_ + 1, act.numel() * act.element_size());
  return t.send(rank_of(stage_ + 1), make_tag(k, j, tensor_kind::activation), act);
}

transport_status stage_executor::backward(std::int64_t k, int j, tensor_transport& t) {
  auto it = pending_.find(j);
  if (it == pending_.end())
    return {transport_errc::invalid,
            "backward of micro-batch " + std::to_string(j) + " before its forward"};
  auto& f = it->second;
  if (is_last()) {
    (f.output / static_cast<double>(cfg_.micro_batches())).backward();
  } else {
    at::Tensor grad = recv_buffer(t, range_.last);
    auto st = t.recv(rank_of(stage_ + 1), make_tag(k, j, tensor_kind::gradient), grad);
    if (!st) {
      st.detail = "receiving gradient " + std::to_string(j) + ": " + st.detail;
      return st;
    }
    f.output.backward(grad);
  }
  at::Tensor input_grad = is_first() ? at::Tensor() : f.input.grad();
  pending_.erase(it);
  progress_.backwards.insert(j);
  if (is_first() || delivered_grad_.count(j))
    return {};
  sent_grad_[j] = input_grad;
  return t.send(rank_of(stage_ - 1), make_tag(k, j, tensor_kind::gradient), input_grad);
}

bool stage_executor::frc(std::int64_t k, int j, const at::Tensor& activation,
                         const std::atomic<bool>* stop) {
  {
    // The FRC thread and, at the step's end, the stage's own thread may both
    // run FRC on this replica: the step's state is shared, the layers are not
    // written by a forward.
    std::lock_guard<std::mutex> lk(frc_mu_);
    begin_step(k);
    if (pending_.count(j))
      return true;
  }
  in_flight f;
  f.input = activation.detach().requires_grad_(true);
  auto x = run_layers(k, j, f.input, stop);
  if (!x.defined())
    return false;
  if (is_last()) {
    auto mb = batch(k, global_micro_batch(j));
    x = model_->loss(x, mb.target);
  }
  f.output = x;
  std::lock_guard<std::mutex> lk(frc_mu_);
  pending_[j] = std::move(f);
  return true;
}

std::shared_ptr<stage_executor> stage_executor::clone() const {
  auto copy = std::make_shared<stage_executor>(cfg_, stage_, range_, corpus_, pipeline_);
  copy->opt_->copy_state_from(*opt_);
  return copy;
}

std::string stage_executor::load_checkpoint(const checkpoint& c) {
  return opt_->load_named(c.tensors, c.step);
}

bool stage_executor::load_state(const at::Tensor& flat, std::int64_t steps) {
  return opt_->load_flat_state(flat, steps);
}

void stage_executor::promote(std::int64_t k) {
  begin_step(k);
  for (const auto& [j, f] : pending_)
    progress_.inherited.insert(j);
  progress_.forwards = progress_.inherited;
}

step_outcome stage_executor::run(std::int64_t k, const std::vector<instruction>& ops,
                                 tensor_transport& t, stage_executor* replica,
                                 const kill_hook& hook) {
  step_outcome out;
  try {
    out = run_ops(k, ops, t, replica, hook);
  } catch (...) {
    if (frc_) // no task may outlive this call: the replica is the caller's
      frc_->settle(false);
    throw;
  }
  // FRC serves only a failover within this step. Interrupted by a loss, this
  // node may be the heir: what is queued is finished now. A completed step (or
  // a killed node) drops what did not fit the idle time: the successor has
  // finished its compute by now, and forwards run later would never be used.
  const bool interrupted = !out.killed && !out.status;
  if (auto error = settle_frc(interrupted); !error.empty() && out.status)
    out.status = {transport_errc::invalid, error};
  return out;
}

std::string stage_executor::settle_frc(bool finish) {
  if (!frc_)
    return {};
  auto s = frc_->settle(finish);
  progress_.frc.insert(s.done.begin(), s.done.end());
  if (s.spill_seconds > 0 || s.dropped > 0 || s.stopped > 0)
    log::get("bamboo.stage")
        ->debug("stage {} step {}: FRC of {} micro-batch(es) ran, {} dropped and {} "
                "stopped (no idle time for them), {:.1f} ms waited for it",
                stage_, progress_.step, s.done.size(), s.dropped, s.stopped,
                1e3 * s.spill_seconds);
  return s.error;
}

void stage_executor::queue_frc(std::int64_t k, int j, stage_executor* replica) {
  // Only when the replica is still a shadow and has the activation to use.
  if (!replica || !sent_act_.count(j) || !frc_queued_.insert(j).second)
    return;
  if (!frc_)
    frc_ = std::make_unique<frc_worker>(cfg_.threads);
  frc_->submit(j, [replica, k, j, act = sent_act_[j]](const std::atomic<bool>& stop) {
    return replica->frc(k, j, act, &stop);
  });
}

step_outcome stage_executor::run_ops(std::int64_t k, const std::vector<instruction>& ops,
                                     tensor_transport& t, stage_executor* replica,
                                     const kill_hook& hook) {
  static auto logger = log::get("bamboo.stage");
  begin_step(k);
  step_outcome out;
  const bool eager = std::any_of(ops.begin(), ops.end(), [](const instruction& op) {
    return op.kind == op_kind::frc;
  });
  while (next_op_ < ops.size()) {
    const auto& op = ops[next_op_];
    if (hook && hook(k, static_cast<int>(next_op_))) {
      out.killed = true;
      return out;
    }
    logger->debug("stage {} step {}: {}", stage_, k, describe({op}));
    if (op.kind == op_kind::frc) {
      queue_frc(k, op.micro_batch, replica); // if its forward did not already
      ++next_op_;
      continue;
    }
    const bool done = op.kind == op_kind::forward
                          ? progress_.forwards.count(op.micro_batch) > 0
                          : progress_.backwards.count(op.micro_batch) > 0;
    transport_status st;
    if (!(done && op.kind == op_kind::backward))
      st = op.kind == op_kind::forward ? forward(k, op.micro_batch, t)
                                       : backward(k, op.micro_batch, t);
    // An op whose compute is done moves on even if its send failed: resend()
    // covers the send, and nothing is ever computed twice.
    const bool computed = op.kind == op_kind::forward
                              ? progress_.forwards.count(op.micro_batch) > 0
                              : progress_.backwards.count(op.micro_batch) > 0;
    if (computed)
      ++next_op_;
    // Eager: FRC of j may start as soon as j's activation exists; it waits on
    // its thread for idle core time, so queueing it early costs nothing.
    if (computed && op.kind == op_kind::forward && eager)
      queue_frc(k, op.micro_batch, replica);
    if (!st) {
      out.status = st;
      return out;
    }
  }
  if (cfg_.pipelines > 1 && !progress_.reduced)
    if (auto st = sum_gradients(k, t); !st) {
      out.status = st;
      return out;
    }
  progress_.complete = true;
  for (const auto& [j, loss] : losses_) // in micro-batch order
    out.loss_sum += loss;
  out.tensor_squares = opt_->grad_squares_each();
  for (double s : out.tensor_squares)
    out.grad_squares += s;
  return out;
}

transport_status stage_executor::resend(const std::vector<int>& activations,
                                        const std::vector<int>& gradients,
                                        tensor_transport& t) {
  const auto k = progress_.step;
  for (int j : activations) {
    auto it = sent_act_.find(j);
    if (it == sent_act_.end() && pending_.count(j))
      it = sent_act_.emplace(j, pending_[j].output.detach()).first;
    if (it == sent_act_.end())
      return {transport_errc::invalid, "no kept activation " + std::to_string(j)};
    if (auto st = t.send(rank_of(stage_ + 1), make_tag(k, j, tensor_kind::activation),
                         it->second);
        !st)
      return st;
  }
  for (int j : gradients) {
    auto it = sent_grad_.find(j);
    if (it == sent_grad_.end())
      return {transport_errc::invalid, "no kept gradient " + std::to_string(j)};
    if (auto st = t.send(rank_of(stage_ - 1), make_tag(k, j, tensor_kind::gradient),
                         it->second);
        !st)
      return st;
  }
  return {};
}

// The same stage of every pipeline sums its gradients, pipeline 0 in the
// middle: it adds the others' packs to its own in pipeline order (never in
// arrival order, so the sum is the same bits every time) and sends the sum
// back. Each keeps its own pack and the sum for the step: an interrupted sum
// is made again, or taken from a pipeline that has it (set_sum_source).
transport_status stage_executor::sum_gradients(std::int64_t k, tensor_transport& t) {
  RECORD_FUNCTION("bamboo::gradient sum", std::vector<c10::IValue>());
  at::NoGradGuard no_grad;
  if (!local_grads_.defined()) {
    std::vector<at::Tensor> grads;
    for (const auto& p : opt_->params())
      grads.push_back(p.tensor.grad());
    local_grads_ = pack_gradients(*this, grads);
  }
  auto buffer = [&] {
    return t.needs_buffer() ? at::empty_like(local_grads_) : at::Tensor();
  };
  const auto mine = make_tag(k, 0, tensor_kind::gradient_sum);
  const auto all = make_tag(k, 1, tensor_kind::gradient_sum);
  auto failed = [](transport_status st, const std::string& what) {
    st.detail = what + ": " + st.detail;
    return st;
  };
  at::Tensor total;
  if (sum_source_ >= 0) {
    total = buffer();
    if (auto st = t.recv(sum_source_ * cfg_.stages + stage_, all, total); !st)
      return failed(st, "receiving the gradient sum from pipeline " +
                            std::to_string(sum_source_));
  } else if (pipeline_ == 0) {
    total = local_grads_.clone();
    for (int q = 1; q < cfg_.pipelines; ++q) {
      at::Tensor theirs = buffer();
      if (auto st = t.recv(rank_of_pipeline(q), mine, theirs); !st)
        return failed(st, "receiving pipeline " + std::to_string(q) + "'s gradients");
      total.add_(theirs);
    }
    for (int q = 1; q < cfg_.pipelines; ++q)
      if (auto st = t.send(rank_of_pipeline(q), all, total); !st)
        return failed(st, "sending the gradient sum");
  } else {
    if (auto st = t.send(rank_of_pipeline(0), mine, local_grads_); !st)
      return failed(st, "sending this pipeline's gradients");
    total = buffer();
    if (auto st = t.recv(rank_of_pipeline(0), all, total); !st)
      return failed(st, "receiving the gradient sum");
  }
  sum_ = total;
  auto grads = unpack_gradients(*this, total);
  auto& params = opt_->params();
  for (std::size_t i = 0; i < params.size(); ++i)
    params[i].tensor.mutable_grad() = grads[i];
  progress_.reduced = true;
  return {};
}

void stage_executor::set_sum_source(std::int64_t k, int source) {
  begin_step(k);
  sum_source_ = source == pipeline_ ? -1 : source;
}

transport_status stage_executor::send_sum(const std::vector<int>& pipelines,
                                          tensor_transport& t) {
  if (!sum_.defined())
    return {transport_errc::invalid,
            "no gradient sum of step " + std::to_string(progress_.step) + " to send"};
  for (int q : pipelines)
    if (auto st = t.send(rank_of_pipeline(q),
                         make_tag(progress_.step, 1, tensor_kind::gradient_sum), sum_);
        !st)
      return st;
  return {};
}

void stage_executor::set_delivered(std::int64_t k, const std::vector<int>& activations,
                                   const std::vector<int>& gradients) {
  begin_step(k);
  delivered_act_.insert(activations.begin(), activations.end());
  delivered_grad_.insert(gradients.begin(), gradients.end());
}

std::vector<at::Tensor> stage_executor::clip_gradients(double clip_coef) {
  RECORD_FUNCTION("bamboo::clipping", std::vector<c10::IValue>());
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (auto& p : opt_->params()) {
    auto g = p.tensor.grad();
    if (g.defined() && clip_coef < 1.0)
      g.mul_(clip_coef);
    grads.push_back(g);
  }
  return grads;
}

void stage_executor::apply_update(std::int64_t k) {
  // The gradients are only read from here on (the shadow reads them too).
  // (A named scope: bamboo-bench-step counts the optimizer's time under it.)
  RECORD_FUNCTION("bamboo::optimizer", std::vector<c10::IValue>());
  opt_->step(k, 1.0);
}

void stage_executor::apply_gradients(std::int64_t k,
                                     const std::vector<at::Tensor>& grads) {
  auto& params = opt_->params();
  for (std::size_t i = 0; i < params.size() && i < grads.size(); ++i)
    params[i].tensor.mutable_grad() = grads[i];
  opt_->step(k, 1.0);
  // The FRC graphs of step k are of no use once it has committed.
  pending_.clear();
}

at::Tensor pack_gradients(const stage_executor& ex,
                          const std::vector<at::Tensor>& grads) {
  std::vector<at::Tensor> parts;
  auto mask = at::zeros({static_cast<long>(grads.size())}, at::kFloat);
  const auto& params = ex.parameters();
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined())
      mask[static_cast<long>(i)] = 1.0f;
    parts.push_back(grads[i].defined() ? grads[i].reshape(-1)
                                       : at::zeros({params[i].tensor.numel()}));
  }
  parts.insert(parts.begin(), mask);
  return at::cat(parts);
}

std::vector<at::Tensor> unpack_gradients(const stage_executor& ex,
                                         const at::Tensor& flat) {
  const auto& params = ex.parameters();
  std::vector<at::Tensor> grads;
  auto mask = flat.narrow(0, 0, static_cast<long>(params.size()));
  long offset = static_cast<long>(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i].tensor;
    auto g = flat.narrow(0, offset, p.numel()).view(p.sizes()).clone();
    offset += p.numel();
    grads.push_back(mask[static_cast<long>(i)].item<float>() != 0 ? g : at::Tensor());
  }
  return grads;
}

long packed_size(const stage_executor& ex) {
  long n = static_cast<long>(ex.parameters().size());
  for (const auto& p : ex.parameters())
    n += p.tensor.numel();
  return n;
}

} // namespace bamboo
