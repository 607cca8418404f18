#include "model/bert.hpp"

#include <ATen/ATen.h>

#include "model/gpt.hpp"
#include "model/rng.hpp"

namespace bamboo::bert {

micro_batch batch(const model_config& cfg, const token_corpus& corpus,
                  const std::vector<std::int64_t>& samples, std::uint64_t seed,
                  std::int64_t step, int j) {
  const auto m = static_cast<std::int64_t>(samples.size());
  const std::int64_t t = cfg.seq_len;
  auto input = at::empty({m, t}, at::kLong);
  auto target = at::full({m, t}, -100, at::kLong);
  auto in = input.accessor<std::int64_t, 2>();
  auto tg = target.accessor<std::int64_t, 2>();
  const auto& tok = corpus.tokens();
  rng64 gen(mix_seed({seed, static_cast<std::uint64_t>(rng_domain::masking),
                      static_cast<std::uint64_t>(step), static_cast<std::uint64_t>(j)}));
  auto corrupt = [&](std::int64_t r, std::int64_t c) {
    tg[r][c] = in[r][c];
    double u = gen.uniform();
    if (u < 0.8)
      in[r][c] = cfg.mask_token();
    else if (u < 0.9)
      in[r][c] = static_cast<std::int64_t>(gen.below(cfg.vocab));
  };
  for (std::int64_t r = 0; r < m; ++r) {
    const auto off = sample_offset(samples[r], cfg);
    for (std::int64_t c = 0; c < t; ++c)
      in[r][c] = tok[off + c];
    bool any = false;
    for (std::int64_t c = 0; c < t; ++c)
      if (gen.uniform() < mask_rate) {
        corrupt(r, c);
        any = true;
      }
    if (!any) // a sample without a label would make its loss undefined
      corrupt(r, static_cast<std::int64_t>(gen.below(t)));
  }
  return {input, target};
}

} // namespace bamboo::bert
