#include "actors/shadow_state.hpp"

#include <string>

#include <ATen/ATen.h>

#include "model/stage_executor.hpp"

namespace bamboo {

std::vector<param_blob> state_blobs(const stage_executor& ex, int stage) {
  std::vector<param_blob> out;
  auto blob = [&](const std::string& name, const at::Tensor& t) {
    auto c = t.detach().contiguous();
    const float* data = c.data_ptr<float>();
    out.push_back({name, std::vector<float>(data, data + c.numel())});
  };
  const auto& opt = ex.optimizer();
  const auto& params = opt.params();
  for (std::size_t i = 0; i < params.size(); ++i) {
    blob(params[i].name, params[i].tensor);
    blob(params[i].name + "#exp_avg", opt.exp_avg()[i]);
    blob(params[i].name + "#exp_avg_sq", opt.exp_avg_sq()[i]);
  }
  out.push_back({"stage" + std::to_string(stage) + "#steps",
                 {static_cast<float>(opt.steps_taken())}});
  return out;
}

} // namespace bamboo
