#include "actors/shadow_state.hpp"

#include <string>

#include <ATen/ATen.h>

#include "model/stage_executor.hpp"

namespace bamboo {

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
