// BERT: bidirectional encoder trained with a masked-LM head.
#pragma once

#include "model/model.hpp"

namespace bamboo::bert {

inline constexpr double mask_rate = 0.15;

// Each block attends to every position.
inline constexpr bool causal_attention = false;

// 15% of positions are chosen (at least one per sample); of those 80% become
// [MASK], 10% a random token, 10% stay. Labels are -100 elsewhere. The draws come
// from (seed, step, micro-batch), so the same micro-batch is masked the same way
// wherever it is built.
micro_batch batch(const model_config& cfg, const token_corpus& corpus,
                  const std::vector<std::int64_t>& samples, std::uint64_t seed,
                  std::int64_t step, int j);

} // namespace bamboo::bert
