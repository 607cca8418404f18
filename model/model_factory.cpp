#include "model/bert.hpp"

#include "model/gpt.hpp"
#include "model/model.hpp"
#include <ATen/ATen.h>

namespace bamboo {

std::vector<double> layer_costs(const model_config& cfg) {
  // Multiply-adds per token, forward; backward is about twice that for every
  // layer, so the ratio between layers is what matters.
  const double d = cfg.d_model, t = cfg.seq_len, v = cfg.vocab;
  const double block = 4 * d * d + 2 * cfg.mlp_ratio * d * d + 2 * t * d;
  std::vector<double> costs;
  costs.push_back(d); // embedding: a gather and an add
  for (int i = 0; i < cfg.layers; ++i)
    costs.push_back(block);
  costs.push_back(d * v + 5 * d); // final LayerNorm, head and softmax
  return costs;
}

// Both models are an embedding, transformer blocks and a head; they differ in
// the blocks' attention mask and in their micro-batches.
std::vector<layer_ptr> build_layers(const model_config& cfg, std::uint64_t seed,
                                    int first, int last) {
  const bool causal =
      cfg.kind == model_kind::gpt ? gpt::causal_attention : bert::causal_attention;
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
          i, seed, cfg.d_model, cfg.heads, cfg.mlp_ratio, causal, cfg.dropout));
  }
  return out;
}

micro_batch make_micro_batch(const train_config& cfg, const token_corpus& corpus,
                             sample_order& order, std::int64_t step, int j) {
  std::vector<std::int64_t> samples(cfg.micro_batch);
  const std::int64_t base = step * static_cast<std::int64_t>(cfg.global_batch) +
                            std::int64_t{j} * cfg.micro_batch;
  for (int i = 0; i < cfg.micro_batch; ++i)
    samples[i] = order.at(base + i);
  // The built-in model's own assembly (one place says how GPT and BERT differ);
  // the corpus is only borrowed for the call.
  const std::shared_ptr<const token_corpus> borrowed(
      std::shared_ptr<const token_corpus>{}, &corpus);
  return builtin_model(cfg.model, borrowed)->make_batch(samples, cfg.seed, step, j);
}

at::Tensor compute_loss(const at::Tensor& logits, const at::Tensor& target) {
  const auto v = logits.size(-1);
  return at::cross_entropy_loss(logits.reshape({-1, v}), target.reshape({-1}),
                                /*weight=*/{}, at::Reduction::Mean,
                                /*ignore_index=*/-100);
}

} // namespace bamboo
