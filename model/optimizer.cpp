#include "model/optimizer.hpp"

#include <ATen/ATen.h>

#include <cmath>

namespace bamboo {

double learning_rate(const optimizer_config& o, std::int64_t k, std::int64_t total) {
  if (o.warmup_steps > 0 && k < o.warmup_steps)
    return o.lr * static_cast<double>(k + 1) / o.warmup_steps;
  const double span = std::max<std::int64_t>(1, total - o.warmup_steps);
  const double progress = std::min(1.0, (k - o.warmup_steps) / span);
  const double min_lr = o.lr * o.min_lr_ratio;
  return min_lr + 0.5 * (o.lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

adamw::adamw(std::vector<named_tensor> params, optimizer_config opts,
             std::int64_t total_steps)
    : params_(std::move(params)), o_(opts), total_(total_steps) {
  for (auto& p : params_) {
    // Matrices decay; biases, LayerNorm gains and position tables do not.
    decay_.push_back(p.tensor.dim() >= 2 && p.name.find(".pos") == std::string::npos);
    m_.push_back(at::zeros_like(p.tensor));
    v_.push_back(at::zeros_like(p.tensor));
  }
}

std::vector<double> adamw::grad_squares_each() const {
  std::vector<double> out;
  out.reserve(params_.size());
  for (const auto& p : params_) {
    const auto& g = p.tensor.grad();
    double n = g.defined() ? g.norm().item<double>() : 0.0;
    out.push_back(n * n);
  }
  return out;
}

double adamw::grad_squares() const {
  double sum = 0;
  for (double s : grad_squares_each())
    sum += s;
  return sum;
}

void adamw::zero_grad() {
  for (auto& p : params_)
    p.tensor.mutable_grad() = at::Tensor();
}

// One pass over parameter, gradient and both moments instead of eight tensor
// ops: the update is memory-bound, and the shadow runs it too. Same arithmetic
// as torch's AdamW up to rounding (a test compares the two).
void adamw::fused_update(at::Tensor& param, const at::Tensor& grad, at::Tensor& m,
                         at::Tensor& v, float decay, double step_size,
                         double bc2_sqrt) const {
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* ma = m.data_ptr<float>();
  float* va = v.data_ptr<float>();
  const float b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
  const float c1 = static_cast<float>(1.0 - o_.beta1),
              c2 = static_cast<float>(1.0 - o_.beta2);
  const float inv_bc2 = static_cast<float>(1.0 / bc2_sqrt);
  const float eps = static_cast<float>(o_.eps), lr = static_cast<float>(step_size);
  const std::int64_t n = param.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = ma[i] * b1 + gi * c1;
    const float vi = va[i] * b2 + gi * gi * c2;
    ma[i] = mi;
    va[i] = vi;
    p[i] = p[i] * decay - lr * mi / (std::sqrt(vi) * inv_bc2 + eps);
  }
}

void adamw::step(std::int64_t k, double clip_coef) {
  at::NoGradGuard no_grad;
  ++t_;
  const double lr = learning_rate(o_, k, total_);
  const double bc1 = 1.0 - std::pow(o_.beta1, static_cast<double>(t_));
  const double bc2 = 1.0 - std::pow(o_.beta2, static_cast<double>(t_));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i].tensor;
    auto g = p.grad();
    if (!g.defined())
      continue;
    if (clip_coef < 1.0)
      g.mul_(clip_coef);
    const float decay = decay_[i] ? static_cast<float>(1.0 - lr * o_.weight_decay) : 1.0f;
    if (p.is_contiguous() && g.is_contiguous() && p.scalar_type() == at::kFloat &&
        g.scalar_type() == at::kFloat) {
      fused_update(p, g, m_[i], v_[i], decay, step_size, bc2_sqrt);
      continue;
    }
    p.mul_(decay);
    m_[i].mul_(o_.beta1).add_(g, 1.0 - o_.beta1);
    v_[i].mul_(o_.beta2).addcmul_(g, g, 1.0 - o_.beta2);
    auto denom = (v_[i].sqrt() / bc2_sqrt).add_(o_.eps);
    p.addcdiv_(m_[i], denom, -step_size);
  }
  zero_grad();
}

} // namespace bamboo

namespace bamboo {

void adamw::copy_state_from(const adamw& other) {
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size() && i < other.params_.size(); ++i) {
    params_[i].tensor.copy_(other.params_[i].tensor);
    m_[i].copy_(other.m_[i]);
    v_[i].copy_(other.v_[i]);
  }
  t_ = other.t_;
}

at::Tensor adamw::flat_state() const {
  std::vector<at::Tensor> parts;
  for (const auto& p : params_)
    parts.push_back(p.tensor.detach().reshape(-1));
  for (const auto& m : m_)
    parts.push_back(m.reshape(-1));
  for (const auto& v : v_)
    parts.push_back(v.reshape(-1));
  return parts.empty() ? at::empty({0}, at::kFloat) : at::cat(parts);
}

long adamw::flat_state_size() const {
  long n = 0;
  for (const auto& p : params_)
    n += p.tensor.numel();
  return 3 * n;
}

std::string adamw::load_named(const std::map<std::string, std::vector<float>>& tensors,
                              std::int64_t steps) {
  auto find = [&](const std::string& name,
                  const at::Tensor& like) -> const std::vector<float>* {
    auto it = tensors.find(name);
    if (it == tensors.end() || static_cast<long>(it->second.size()) != like.numel())
      return nullptr;
    return &it->second;
  };
  for (std::size_t i = 0; i < params_.size(); ++i)
    for (const char* suffix : {"", "#exp_avg", "#exp_avg_sq"})
      if (!find(params_[i].name + suffix, params_[i].tensor))
        return "the checkpoint has no tensor " + params_[i].name + suffix + " of " +
               std::to_string(params_[i].tensor.numel()) + " values";
  at::NoGradGuard no_grad;
  auto load = [&](at::Tensor& dst, const std::vector<float>& src) {
    dst.copy_(at::from_blob(const_cast<float*>(src.data()), dst.sizes(), at::kFloat));
  };
  for (std::size_t i = 0; i < params_.size(); ++i) {
    load(params_[i].tensor, *find(params_[i].name, params_[i].tensor));
    load(m_[i], *find(params_[i].name + "#exp_avg", m_[i]));
    load(v_[i], *find(params_[i].name + "#exp_avg_sq", v_[i]));
  }
  t_ = steps;
  return {};
}

bool adamw::load_flat_state(const at::Tensor& flat, std::int64_t steps) {
  if (flat.dim() != 1 || flat.numel() != flat_state_size())
    return false;
  at::NoGradGuard no_grad;
  long offset = 0;
  auto take = [&](at::Tensor& dst) {
    dst.copy_(flat.narrow(0, offset, dst.numel()).view(dst.sizes()));
    offset += dst.numel();
  };
  for (auto& p : params_)
    take(p.tensor);
  for (auto& m : m_)
    take(m);
  for (auto& v : v_)
    take(v);
  t_ = steps;
  return true;
}

} // namespace bamboo
