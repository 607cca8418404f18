// Runs one stage's instructions for a step: forwards and backwards of its layers,
// receiving and sending activations and gradients through a tensor transport, and
// the optimizer update once the step commits. Knows no actor and no plan.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "model/model.hpp"
#include "model/optimizer.hpp"
#include "model/partition.hpp"
#include "model/schedule.hpp"
#include "transport/tensor_transport.hpp"

namespace bamboo {

struct step_outcome {
  transport_status status;   // not ok: the step could not finish here
  double loss_sum = 0;       // sum of micro-batch losses (last stage only)
  double grad_squares = 0;   // squared gradient norm of this stage's parameters
  int forwards = 0;
  int backwards = 0;
};

class stage_executor {
public:
  stage_executor(const train_config& cfg, int stage, stage_range range,
                 std::shared_ptr<const token_corpus> corpus);

  int stage() const { return stage_; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == cfg_.stages - 1; }

  // Runs `ops` of step k; on error the step's partial state is dropped.
  step_outcome run_step(std::int64_t k, const std::vector<instruction>& ops,
                        tensor_transport& t);
  void apply_update(std::int64_t k, double clip_coef);

  // Parameters named by global layer path ("layers.3.attn.qkv.weight").
  const std::vector<named_tensor>& parameters() const { return opt_->params(); }
  const adamw& optimizer() const { return *opt_; }

private:
  struct in_flight {
    at::Tensor input;   // leaf that receives the input gradient (undefined on stage 0)
    at::Tensor output;  // activation sent on, or the loss on the last stage
  };
  transport_status forward(std::int64_t k, int j, tensor_transport& t, step_outcome& out);
  transport_status backward(std::int64_t k, int j, tensor_transport& t);

  train_config cfg_;
  int stage_;
  stage_range range_;
  std::shared_ptr<const token_corpus> corpus_;
  sample_order order_;
  std::vector<layer_ptr> layers_;
  std::unique_ptr<adamw> opt_;
  std::map<int, in_flight> pending_;
};

} // namespace bamboo
