// A model as bamboo sees it: an ordered list of pipeline layers with estimated
// costs, a way to build any contiguous slice of it, micro-batches and a loss.
// Dispatches to gpt.hpp / bert.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.hpp"
#include "model/data.hpp"
#include "model/layers.hpp"
#include "model/model_definition.hpp" // micro_batch

namespace bamboo {

// Relative compute cost of each pipeline layer (forward + backward FLOPs).
std::vector<double> layer_costs(const model_config& cfg);

// Layers [first, last) of the model, each initialised from (seed, layer index), so
// the same layer has the same initial weights whichever stage builds it.
std::vector<layer_ptr> build_layers(const model_config& cfg, std::uint64_t seed,
                                    int first, int last);

// Micro-batch j of step k: the samples at global positions k*G + j*m .. + m.
micro_batch make_micro_batch(const train_config& cfg, const token_corpus& corpus,
                             sample_order& order, std::int64_t step, int j);

// Mean token cross-entropy over the positions whose label is not -100.
at::Tensor compute_loss(const at::Tensor& logits, const at::Tensor& target);

} // namespace bamboo
