#include "model/model_definition.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "model/bert.hpp"
#include "model/data.hpp"
#include "model/gpt.hpp"
#include "model/safetensors.hpp"

namespace bamboo {

namespace {

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << "[";
  for (std::int64_t i = 0; i < t.dim(); ++i)
    out << (i ? ", " : "") << t.size(i);
  out << "] " << c10::toString(t.scalar_type());
  return out.str();
}

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

// The samples of one probe micro-batch of m: the first m (the dataset wraps).
std::vector<std::int64_t> probe_samples(const model_definition& model, int m) {
  std::vector<std::int64_t> out;
  for (int i = 0; i < m; ++i)
    out.push_back(i % std::max<std::int64_t>(1, model.samples()));
  return out;
}

class builtin : public model_definition {
public:
  builtin(model_config cfg, std::shared_ptr<const token_corpus> corpus)
      : cfg_(std::move(cfg)), corpus_(std::move(corpus)),
        samples_(corpus_ ? sample_count(*corpus_, cfg_) : 0) {}

  std::string name() const override { return to_string(cfg_.kind); }
  int pipeline_layers() const override { return cfg_.pipeline_layers(); }
  std::vector<double> layer_costs() const override { return bamboo::layer_costs(cfg_); }
  std::vector<layer_ptr> build_layers(std::uint64_t seed, int first,
                                      int last) const override {
    return bamboo::build_layers(cfg_, seed, first, last);
  }
  std::int64_t samples() const override { return samples_; }
  micro_batch make_batch(const std::vector<std::int64_t>& samples, std::uint64_t seed,
                         std::int64_t step, int j) const override {
    if (cfg_.kind == model_kind::gpt)
      return gpt::batch(cfg_, *corpus_, samples);
    return bert::batch(cfg_, *corpus_, samples, seed, step, j);
  }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const override {
    return compute_loss(output, target);
  }
  // Every boundary of a transformer is a [m, T, d_model] float activation.
  tensor_spec boundary(int, int m) const override {
    return {{m, cfg_.seq_len, cfg_.d_model}, at::kFloat};
  }

private:
  model_config cfg_;
  std::shared_ptr<const token_corpus> corpus_;
  std::int64_t samples_;
};

} // namespace

tensor_spec model_definition::boundary(int layer, int m) const {
  std::lock_guard<std::mutex> guard{boundary_mtx_};
  for (const auto& [size, specs] : boundaries_)
    if (size == m)
      return specs.at(static_cast<std::size_t>(layer));
  // One forward without gradients, through fresh layers (any seed: shapes do
  // not depend on weights), outside training (no dropout draws).
  at::NoGradGuard no_grad;
  auto batch = make_batch(probe_samples(*this, m), 0, 0, 0);
  std::vector<tensor_spec> specs{{batch.input.sizes().vec(), batch.input.scalar_type()}};
  at::Tensor x = batch.input;
  const layer_ctx ctx{0, 0, 0, false};
  for (auto& l : build_layers(0, 0, pipeline_layers())) {
    x = l->forward(x, ctx);
    specs.push_back({x.sizes().vec(), x.scalar_type()});
  }
  boundaries_.emplace_back(m, specs);
  return specs.at(static_cast<std::size_t>(layer));
}

int train_config::model_layers() const {
  return custom_model ? custom_model->pipeline_layers() : model.pipeline_layers();
}

std::shared_ptr<const model_definition>
builtin_model(const model_config& cfg, std::shared_ptr<const token_corpus> corpus) {
  return std::make_shared<builtin>(cfg, std::move(corpus));
}

std::shared_ptr<const model_definition>
model_of(const train_config& cfg, std::shared_ptr<const token_corpus> corpus) {
  if (cfg.custom_model)
    return cfg.custom_model;
  return builtin_model(cfg.model, std::move(corpus));
}

std::optional<std::string> check_model(const model_definition& model,
                                       const train_config& cfg) {
  const std::string who = "model '" + model.name() + "'";
  const int n = model.pipeline_layers();
  if (n < 1)
    return who + " has no layers";
  if (cfg.stages > n)
    return "--stages " + std::to_string(cfg.stages) + " exceeds " + who + "'s " +
           std::to_string(n) + " pipeline layers";
  const auto costs = model.layer_costs();
  if (static_cast<int>(costs.size()) != n)
    return who + " gives " + std::to_string(costs.size()) + " layer costs for its " +
           std::to_string(n) + " layers";
  for (std::size_t i = 0; i < costs.size(); ++i)
    if (!(costs[i] > 0) || !std::isfinite(costs[i]))
      return who + ": the cost of layer " + std::to_string(i) +
             " must be positive and finite";
  if (model.samples() < 1)
    return who + "'s dataset has no samples";
  at::NoGradGuard no_grad;
  micro_batch batch;
  try {
    batch = model.make_batch(probe_samples(model, cfg.micro_batch), cfg.seed, 0, 0);
  } catch (const std::exception& e) {
    return who + ": a micro-batch of " + std::to_string(cfg.micro_batch) +
           " samples cannot be made: " + first_line(e.what());
  }
  std::vector<layer_ptr> layers;
  try {
    layers = model.build_layers(cfg.seed, 0, n);
  } catch (const std::exception& e) {
    return who + ": its layers cannot be built: " + first_line(e.what());
  }
  if (static_cast<int>(layers.size()) != n)
    return who + " built " + std::to_string(layers.size()) + " layers for [0, " +
           std::to_string(n) + ")";
  at::Tensor x = batch.input;
  const layer_ctx ctx{cfg.seed, 0, 0, true};
  for (int i = 0; i < n; ++i) {
    const auto in = describe(x);
    try {
      x = layers[static_cast<std::size_t>(i)]->forward(x, ctx);
    } catch (const std::exception& e) {
      return who + ": layer " + std::to_string(i) + " cannot take " +
             (i == 0 ? std::string("the micro-batch's input ")
                     : "the output of layer " + std::to_string(i - 1) + ", ") +
             in + ": " + first_line(e.what());
    }
  }
  at::Tensor l;
  try {
    l = model.loss(x, batch.target);
  } catch (const std::exception& e) {
    return who + ": the loss cannot take the last layer's output " + describe(x) + ": " +
           first_line(e.what());
  }
  if (!l.defined() || l.numel() != 1)
    return who + ": the loss returns " + (l.defined() ? describe(l) : "nothing") +
           ", not a scalar";
  return std::nullopt;
}

std::string model_digest(const model_definition& model) {
  {
    std::lock_guard<std::mutex> guard{model.boundary_mtx_};
    if (!model.digest_.empty())
      return model.digest_;
  }
  std::ostringstream out;
  out << model.name() << "\nlayers " << model.pipeline_layers() << "\nsamples "
      << model.samples() << "\ncosts";
  for (double c : model.layer_costs())
    out << " " << c;
  int i = 0;
  for (auto& l : model.build_layers(0, 0, model.pipeline_layers())) {
    out << "\nlayer " << i++;
    for (const auto& p : l->params()) {
      // Named as torch::nn::Module named them (dots as '_'), which layers were
      // until 0.x: the digest of a model stays what it was.
      std::string flat = p.name;
      std::replace(flat.begin(), flat.end(), '.', '_');
      out << " " << flat << describe(p.tensor);
    }
  }
  for (int layer = 1; layer < model.pipeline_layers(); ++layer) {
    const auto b = model.boundary(layer, 1);
    out << "\nboundary " << layer << " " << c10::toString(b.dtype);
    for (auto d : b.shape)
      out << " " << d;
  }
  // The first sample as the model makes it: the same dataset, not just its size.
  at::NoGradGuard no_grad;
  const auto batch = model.make_batch({0}, 0, 0, 0);
  for (const auto& t : {batch.input, batch.target}) {
    const auto c = t.contiguous().cpu();
    const auto* p = static_cast<const char*>(c.data_ptr());
    out << "\n" << describe(c) << " " << std::string(p, p + c.nbytes());
  }
  const auto text = out.str();
  auto digest =
      sha256_hex(std::vector<std::uint8_t>(text.begin(), text.end())).substr(0, 16);
  std::lock_guard<std::mutex> guard{model.boundary_mtx_};
  model.digest_ = digest;
  return digest;
}

} // namespace bamboo
