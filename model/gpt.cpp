#include "model/gpt.hpp"

#include <ATen/ATen.h>

namespace bamboo::gpt {

micro_batch batch(const model_config& cfg, const token_corpus& corpus,
                  const std::vector<std::int64_t>& samples) {
  const auto m = static_cast<std::int64_t>(samples.size());
  const std::int64_t t = cfg.seq_len;
  auto input = at::empty({m, t}, at::kLong);
  auto target = at::empty({m, t}, at::kLong);
  auto in = input.accessor<std::int64_t, 2>();
  auto tg = target.accessor<std::int64_t, 2>();
  const auto& tok = corpus.tokens();
  for (std::int64_t r = 0; r < m; ++r) {
    const auto off = sample_offset(samples[r], cfg);
    for (std::int64_t c = 0; c < t; ++c) {
      in[r][c] = tok[off + c];
      tg[r][c] = tok[off + c + 1];
    }
  }
  return {input, target};
}

} // namespace bamboo::gpt
