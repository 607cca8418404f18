#include "model/layers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>

#include "model/rng.hpp"

namespace bamboo {

at::Tensor pipeline_layer::add_param(const std::string& name, at::Tensor t) {
  t.set_requires_grad(true);
  params_.push_back({name, t});
  return t;
}

at::Tensor pipeline_layer::normal_param(const std::string& name, at::IntArrayRef shape,
                                        double std, at::Generator& gen) {
  auto t = at::empty(shape, at::kFloat);
  t.normal_(0.0, std, gen);
  return add_param(name, t);
}

at::Tensor pipeline_layer::constant_param(const std::string& name, at::IntArrayRef shape,
                                          double v) {
  return add_param(name, at::full(shape, v, at::kFloat));
}

at::Generator pipeline_layer::init_generator(std::uint64_t seed) const {
  auto key = mix_seed({seed, static_cast<std::uint64_t>(rng_domain::init),
                       static_cast<std::uint64_t>(index_)});
  return at::make_generator<at::CPUGeneratorImpl>(key);
}

at::Generator pipeline_layer::dropout_generator(const layer_ctx& ctx) const {
  auto key = mix_seed({ctx.seed, static_cast<std::uint64_t>(rng_domain::dropout),
                       static_cast<std::uint64_t>(ctx.step),
                       static_cast<std::uint64_t>(ctx.micro_batch),
                       static_cast<std::uint64_t>(index_)});
  return at::make_generator<at::CPUGeneratorImpl>(key);
}

namespace {

// The mask of a float tensor: element i is kept when 32 bits of a counter-based
// hash of (key, i) are at least p * 2^32. LibTorch's bernoulli_ draws each element
// from a Mersenne twister in turn (15 ns an element here, a tenth of the step);
// here the elements are independent, so the loop vectorizes: on x86-64 with gcc,
// one version per vector width (AVX-512, AVX2, any), chosen when the library
// loads, all with the same bits (0.1 ns an element, 1.6 unvectorized).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&                   \
    !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"),
               optimize("O3")))
#endif
void fill_dropout_mask(float* out, std::int64_t n, double p, std::uint64_t key) {
  const auto drop_below =
      static_cast<std::uint32_t>(std::min(p * 4294967296.0, 4294967295.0));
  const float kept = static_cast<float>(1.0 / (1.0 - p));
  for (std::int64_t i = 0; i + 1 < n; i += 2) {
    const std::uint64_t h = splitmix64(key + static_cast<std::uint64_t>(i));
    out[i] = static_cast<std::uint32_t>(h) < drop_below ? 0.0f : kept;
    out[i + 1] = static_cast<std::uint32_t>(h >> 32) < drop_below ? 0.0f : kept;
  }
  if (n % 2 != 0) {
    const std::uint64_t h = splitmix64(key + static_cast<std::uint64_t>(n - 1));
    out[n - 1] = static_cast<std::uint32_t>(h) < drop_below ? 0.0f : kept;
  }
}

} // namespace

at::Tensor pipeline_layer::dropout(const at::Tensor& x, double p, const layer_ctx& ctx,
                                   at::Generator& gen) {
  if (!ctx.training || p <= 0)
    return x;
  // The scale goes into the mask (0 or 1/(1-p), exactly): one product with x
  // instead of two, forward and backward.
  auto keep = at::empty(x.sizes(), x.options().requires_grad(false));
  if (keep.scalar_type() != at::kFloat) {
    keep.bernoulli_(1.0 - p, gen);
    return x * keep.mul_(1.0 / (1.0 - p));
  }
  // One draw of the layer's generator keys each call, so that the calls of a
  // layer (attention's two) differ and a recomputation repeats them.
  std::uint64_t key = 0;
  {
    std::lock_guard<std::mutex> guard(gen.mutex());
    key = at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
  }
  {
    RECORD_FUNCTION("bamboo::dropout mask", std::vector<c10::IValue>());
    fill_dropout_mask(keep.data_ptr<float>(), keep.numel(), p, key);
  }
  return x * keep;
}

embedding_layer::embedding_layer(int index, std::uint64_t seed, int vocab, int seq_len,
                                 int d_model, double dropout)
    : pipeline_layer(index), p_(dropout) {
  auto gen = init_generator(seed);
  tok_ = normal_param("tok", {vocab, d_model}, 0.02, gen);
  pos_ = normal_param("pos", {seq_len, d_model}, 0.02, gen);
}

at::Tensor embedding_layer::forward(const at::Tensor& ids, const layer_ctx& ctx) {
  const auto t = ids.size(1);
  auto x = at::embedding(tok_, ids) + pos_.narrow(0, 0, t);
  auto gen = dropout_generator(ctx);
  return dropout(x, p_, ctx, gen);
}

transformer_block::transformer_block(int index, std::uint64_t seed, int d, int heads,
                                     int mlp_ratio, bool causal, double dropout)
    : pipeline_layer(index), heads_(heads), causal_(causal), p_(dropout) {
  auto gen = init_generator(seed);
  const int h = d * mlp_ratio;
  ln1_w_ = constant_param("ln1.weight", {d}, 1.0);
  ln1_b_ = constant_param("ln1.bias", {d}, 0.0);
  qkv_w_ = normal_param("attn.qkv.weight", {3 * d, d}, 0.02, gen);
  qkv_b_ = constant_param("attn.qkv.bias", {3 * d}, 0.0);
  proj_w_ = normal_param("attn.proj.weight", {d, d}, 0.02, gen);
  proj_b_ = constant_param("attn.proj.bias", {d}, 0.0);
  ln2_w_ = constant_param("ln2.weight", {d}, 1.0);
  ln2_b_ = constant_param("ln2.bias", {d}, 0.0);
  fc1_w_ = normal_param("mlp.fc1.weight", {h, d}, 0.02, gen);
  fc1_b_ = constant_param("mlp.fc1.bias", {h}, 0.0);
  fc2_w_ = normal_param("mlp.fc2.weight", {d, h}, 0.02, gen);
  fc2_b_ = constant_param("mlp.fc2.bias", {d}, 0.0);
}

at::Tensor transformer_block::causal_mask(std::int64_t t, const at::Tensor& like) {
  std::lock_guard<std::mutex> lk(future_mu_);
  if (!future_.defined() || future_.size(0) != t) // once per length, not per call
    future_ = at::ones({t, t}, like.options().dtype(at::kBool)).triu(1);
  return future_;
}

at::Tensor transformer_block::attention(const at::Tensor& x, const layer_ctx& ctx,
                                        at::Generator& gen) {
  const auto b = x.size(0), t = x.size(1), d = x.size(2);
  const auto hd = d / heads_, bh = b * heads_;
  // One copy puts q, k and v head-major ([3, b*h, t, hd], each contiguous): the
  // batched products read them without copies of their own, and their gradients
  // come back through unbind as one stack (select's would be three zero-filled
  // tensors of qkv's size, copied into and summed).
  auto qkv = at::linear(x, qkv_w_, qkv_b_)
                 .view({b, t, 3, heads_, hd})
                 .permute({2, 0, 3, 1, 4})
                 .reshape({3, bh, t, hd});
  if (ctx.stop_requested())
    return {};
  const auto parts = qkv.unbind(0);
  const auto &q = parts[0], &k = parts[1], &v = parts[2];
  // The scale is the product's alpha, free in the GEMM forward and backward;
  // with beta 0 the uninitialized input is not read.
  auto att = at::baddbmm(at::empty({bh, t, t}, x.options()), q, k.transpose(1, 2),
                         /*beta=*/0, /*alpha=*/1.0 / std::sqrt(double(hd)));
  if (causal_) // in place: the product's backward needs its inputs, not its output
    att.masked_fill_(causal_mask(t, x), -std::numeric_limits<float>::infinity());
  att = dropout(at::softmax(att, -1), p_, ctx, gen);
  auto y = at::bmm(att, v).view({b, heads_, t, hd}).transpose(1, 2).reshape({b, t, d});
  return dropout(at::linear(y, proj_w_, proj_b_), p_, ctx, gen);
}

at::Tensor transformer_block::forward(const at::Tensor& x, const layer_ctx& ctx) {
  // A forward told to stop (FRC a completed step no longer needs) gives up at
  // the next of these checks: they are a few ms apart, all a step waits for.
  const auto d = x.size(2);
  auto gen = dropout_generator(ctx);
  auto a = attention(at::layer_norm(x, {d}, ln1_w_, ln1_b_), ctx, gen);
  if (!a.defined() || ctx.stop_requested())
    return {};
  auto h = x + a;
  auto m = at::gelu(at::linear(at::layer_norm(h, {d}, ln2_w_, ln2_b_), fc1_w_, fc1_b_));
  if (ctx.stop_requested())
    return {};
  return h + dropout(at::linear(m, fc2_w_, fc2_b_), p_, ctx, gen);
}

head_layer::head_layer(int index, std::uint64_t seed, int d, int vocab)
    : pipeline_layer(index) {
  auto gen = init_generator(seed);
  ln_w_ = constant_param("ln_f.weight", {d}, 1.0);
  ln_b_ = constant_param("ln_f.bias", {d}, 0.0);
  w_ = normal_param("lm_head.weight", {vocab, d}, 0.02, gen);
  b_ = constant_param("lm_head.bias", {vocab}, 0.0);
}

at::Tensor head_layer::forward(const at::Tensor& x, const layer_ctx&) {
  const auto d = x.size(2);
  return at::linear(at::layer_norm(x, {d}, ln_w_, ln_b_), w_, b_);
}

} // namespace bamboo
