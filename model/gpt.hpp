// GPT: decoder-only transformer trained on next-token prediction.
#pragma once

#include "model/model.hpp"

namespace bamboo::gpt {

// Each block attends to earlier positions only.
inline constexpr bool causal_attention = true;

// Inputs are the sample's first T tokens, targets the T tokens after each.
micro_batch batch(const model_config& cfg, const token_corpus& corpus,
                  const std::vector<std::int64_t>& samples);

} // namespace bamboo::gpt
