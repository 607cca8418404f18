// AdamW with linear warm-up and cosine decay, written out so that its state (both
// moments and the step counter) is ours to copy, compare and checkpoint: a shadow
// replica applies the very same update to the very same state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "model/config.hpp"
#include "model/layers.hpp"

namespace bamboo {

// Learning rate of (0-based) step k of a run of `total` steps.
double learning_rate(const optimizer_config& o, std::int64_t k, std::int64_t total);

class adamw {
public:
  adamw(std::vector<named_tensor> params, optimizer_config opts,
        std::int64_t total_steps);

  // Scales the gradients by clip_coef (when < 1), applies step k's update and
  // clears the gradients.
  void step(std::int64_t k, double clip_coef);
  // Sum over parameters of the squared L2 norm of their gradients.
  double grad_squares() const;
  // Each parameter's squared gradient norm, in parameter order (0: no gradient).
  std::vector<double> grad_squares_each() const;
  void zero_grad();

  std::int64_t steps_taken() const { return t_; }
  // Makes this optimizer's parameters, moments and step counter equal to
  // another's of the same layers (a new shadow replica starts this way).
  void copy_state_from(const adamw& other);
  // Every parameter, then every first and every second moment, flattened into
  // one float tensor: what a new shadow in another process receives. The step
  // counter travels beside it.
  at::Tensor flat_state() const;
  long flat_state_size() const;
  // The inverse of flat_state(); false (and nothing changed) on a size mismatch.
  bool load_flat_state(const at::Tensor& flat, std::int64_t steps);
  // Parameters and moments by name ("name", "name#exp_avg", "name#exp_avg_sq")
  // from a checkpoint of any pipeline depth; the first tensor missing or of
  // another size is the error (and nothing is changed).
  std::string load_named(const std::map<std::string, std::vector<float>>& tensors,
                         std::int64_t steps);
  const std::vector<named_tensor>& params() const { return params_; }
  const std::vector<at::Tensor>& exp_avg() const { return m_; }
  const std::vector<at::Tensor>& exp_avg_sq() const { return v_; }

private:
  void fused_update(at::Tensor& param, const at::Tensor& grad, at::Tensor& m,
                    at::Tensor& v, float decay, double step_size, double bc2_sqrt) const;
  std::vector<named_tensor> params_;
  std::vector<bool> decay_;
  std::vector<at::Tensor> m_, v_;
  optimizer_config o_;
  std::int64_t total_;
  std::int64_t t_ = 0;
};

} // namespace bamboo
