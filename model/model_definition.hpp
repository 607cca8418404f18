// A model as bamboo trains it, for any trainer's own model: an ordered list of
// pipeline layers with a cost each, a dataset of numbered samples, how some of
// them make a micro-batch, and the loss. GPT and BERT (model/model.hpp) are two
// implementations (builtin_model); a custom trainer writes its own and sets
// train_config::custom_model. The executor knows nothing else of a model.
//
// Exactness rests on the same rules as ours: every random draw of a layer goes
// through its layer_ctx (pipeline_layer's init and dropout generators), and
// make_batch depends only on its arguments, so any pipeline depth gives the
// same bits.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/layers.hpp"

namespace bamboo {

class token_corpus;

struct micro_batch {
  at::Tensor input;  // what layer 0 takes (token ids [m, T] for GPT and BERT)
  at::Tensor target; // what the loss compares the last layer's output with
};

// The tensor that crosses a stage boundary, per micro-batch.
struct tensor_spec {
  std::vector<std::int64_t> shape;
  at::ScalarType dtype = at::kFloat;
};

class model_definition {
public:
  virtual ~model_definition() = default;
  // Its name in logs, checkpoints and errors.
  virtual std::string name() const = 0;
  virtual int pipeline_layers() const = 0;
  // Relative compute cost of each layer (the partitioner balances them).
  virtual std::vector<double> layer_costs() const = 0;
  // Layers [first, last), each initialised from (seed, its index) alone.
  virtual std::vector<layer_ptr> build_layers(std::uint64_t seed, int first,
                                              int last) const = 0;
  // Samples in the dataset (an epoch); sample order is bamboo's.
  virtual std::int64_t samples() const = 0;
  // The micro-batch of these samples; (seed, step, micro_batch) for draws it
  // makes (BERT's masking), micro_batch being its number in the whole step.
  virtual micro_batch make_batch(const std::vector<std::int64_t>& samples,
                                 std::uint64_t seed, std::int64_t step,
                                 int micro_batch) const = 0;
  // A scalar: the mean loss of the micro-batch.
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) const = 0;
  // What enters layer `layer` (1..pipeline_layers()-1) for a micro-batch of `m`
  // samples, so network transports can receive into an exact buffer. By
  // default found by a forward of one micro-batch through the layers before it
  // (made once per m, without gradients); a model that knows may say so.
  virtual tensor_spec boundary(int layer, int m) const;

private:
  friend std::string model_digest(const model_definition& model);
  mutable std::string digest_; // model_digest's, once made
  mutable std::mutex boundary_mtx_;
  mutable std::vector<std::pair<int, std::vector<tensor_spec>>> boundaries_; // by m
};

// GPT or BERT of `cfg` over `corpus`.
std::shared_ptr<const model_definition>
builtin_model(const model_config& cfg, std::shared_ptr<const token_corpus> corpus);

// The run's model: its custom_model, or the built-in one of cfg.model.
std::shared_ptr<const model_definition>
model_of(const train_config& cfg, std::shared_ptr<const token_corpus> corpus);

// A custom model's mistakes, found by building it and running one micro-batch
// of `cfg` forward through every layer and the loss, named: no layers, costs
// that do not match them, an empty dataset, a layer that cannot take the
// previous layer's output, a loss that is not a scalar. nullopt when sound.
std::optional<std::string> check_model(const model_definition& model,
                                       const train_config& cfg);

// What tells two builds of a model apart (16 hex digits): its name, layers,
// costs, dataset size, every layer's parameter names and shapes, its boundary
// shapes and its first sample. Workers must build the manager's model: a join
// with another digest is refused.
std::string model_digest(const model_definition& model);

} // namespace bamboo
