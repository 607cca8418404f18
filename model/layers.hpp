// The building blocks every model is made of. A model is an ordered list of
// pipeline_layers; a stage owns a contiguous slice of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

// The tensor and generator types only: most files that include this never call
// an operator, and <ATen/ATen.h> (every operator's declaration) costs 4 s of
// compile time more per file; a layer's .cpp includes it.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace bamboo {

struct named_tensor {
  std::string name;
  at::Tensor tensor;
};

// What a layer needs to draw its random numbers reproducibly.
struct layer_ctx {
  std::uint64_t seed = 0;
  std::int64_t step = 0;
  int micro_batch = 0;
  bool training = true;
  // Set for a forward nobody may need (FRC at a step's end). A layer may check
  // it between its parts and return an undefined tensor: the forward is dropped.
  const std::atomic<bool>* stop = nullptr;
  bool stop_requested() const { return stop && stop->load(std::memory_order_relaxed); }
};

// Its parameters are those it registers with normal_param and constant_param
// (the optimizer, the shadows and the checkpoints see only those).
class pipeline_layer {
public:
  explicit pipeline_layer(int index) : index_(index) {}
  virtual ~pipeline_layer() = default;
  pipeline_layer(const pipeline_layer&) = delete;
  pipeline_layer& operator=(const pipeline_layer&) = delete;
  virtual at::Tensor forward(const at::Tensor& x, const layer_ctx& ctx) = 0;
  int index() const { return index_; }
  // Parameters under their path inside the layer ("attn.qkv.weight").
  const std::vector<named_tensor>& params() const { return params_; }

protected:
  // Registers a parameter drawn from N(0, std) with this layer's init generator.
  at::Tensor normal_param(const std::string& name, at::IntArrayRef shape, double std,
                          at::Generator& gen);
  at::Tensor constant_param(const std::string& name, at::IntArrayRef shape, double v);
  at::Generator init_generator(std::uint64_t seed) const;
  at::Generator dropout_generator(const layer_ctx& ctx) const;
  static at::Tensor dropout(const at::Tensor& x, double p, const layer_ctx& ctx,
                            at::Generator& gen);

private:
  at::Tensor add_param(const std::string& name, at::Tensor t);
  int index_;
  std::vector<named_tensor> params_;
};

using layer_ptr = std::shared_ptr<pipeline_layer>;

// Token + learned position embeddings, then dropout.
class embedding_layer : public pipeline_layer {
public:
  embedding_layer(int index, std::uint64_t seed, int vocab, int seq_len, int d_model,
                  double dropout);
  at::Tensor forward(const at::Tensor& ids, const layer_ctx& ctx) override;

private:
  at::Tensor tok_, pos_;
  double p_;
};

// Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x)).
class transformer_block : public pipeline_layer {
public:
  transformer_block(int index, std::uint64_t seed, int d_model, int heads, int mlp_ratio,
                    bool causal, double dropout);
  at::Tensor forward(const at::Tensor& x, const layer_ctx& ctx) override;

private:
  at::Tensor attention(const at::Tensor& x, const layer_ctx& ctx, at::Generator& gen);
  int heads_;
  bool causal_;
  double p_;
  at::Tensor ln1_w_, ln1_b_, qkv_w_, qkv_b_, proj_w_, proj_b_;
  at::Tensor ln2_w_, ln2_b_, fc1_w_, fc1_b_, fc2_w_, fc2_b_;
  at::Tensor causal_mask(std::int64_t t, const at::Tensor& like);
  // The causal mask, by length. FRC may run a replica's layer on two threads.
  std::mutex future_mu_;
  at::Tensor future_;
};

// Final LayerNorm and the output projection to the vocabulary (logits).
class head_layer : public pipeline_layer {
public:
  head_layer(int index, std::uint64_t seed, int d_model, int vocab);
  at::Tensor forward(const at::Tensor& x, const layer_ctx& ctx) override;

private:
  at::Tensor ln_w_, ln_b_, w_, b_;
};

} // namespace bamboo
