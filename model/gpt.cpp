#include "model/gpt.hpp"

namespace bamboo::gpt {

std::vector<layer_ptr> layers(const model_config& cfg, std::uint64_t seed, int first,
                              int last) {
  std::vector<layer_ptr> out;
  const int head = cfg.pipeline_layers() - 1;
  for (int i = first; i < last; ++i) {
    if (i == 0)
      out.push_back(std::make_shared<embedding_layer>(
          i, seed, cfg.input_vocab(), cfg.seq_len, cfg.d_model, cfg.dropout));
    else if (i == head)
      out.push_back(std::make_shared<head_layer>(i, seed, cfg.d_model, cfg.vocab));
    else
      out.push_back(std::make_shared<transformer_block>(
          i, seed, cfg.d_model, cfg.heads, cfg.mlp_ratio, /*causal=*/true, cfg.dropout));
  }
  return out;
}

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
