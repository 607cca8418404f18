// The layers' contracts. Dropout's mask: a counter-based hash keyed by (seed, step,
// micro-batch, layer) and the call's place in the layer, so the same key draws the same
// mask on any stage or thread, and the rate and the scale are those asked for. A block
// told to stop (FRC at a step's end) gives up, and computes the same when not.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "model/layers.hpp"

using namespace bamboo;

namespace {

// A layer whose forward is two dropouts of its input, one after the other.
class two_dropouts : public pipeline_layer {
public:
  two_dropouts(int index, double p) : pipeline_layer(index), p_(p) {}
  at::Tensor forward(const at::Tensor& x, const layer_ctx& ctx) override {
    auto gen = dropout_generator(ctx);
    auto first = dropout(x, p_, ctx, gen);
    return at::stack({first, dropout(x, p_, ctx, gen)});
  }

private:
  double p_;
};

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && at::equal(a, b);
}

} // namespace

TEST_CASE("dropout keeps 1-p of the elements scaled by 1/(1-p) and draws the same "
          "mask for the same key only",
          "[model]") {
  const double p = 0.1;
  two_dropouts layer(2, p);
  const auto x = at::ones({4, 8, 127, 33}); // an odd count: the last element alone
  const layer_ctx ctx{7, 3, 1, true};
  const auto y = layer.forward(x, ctx);
  const auto first = y[0], second = y[1];

  const float kept = static_cast<float>(1.0 / (1.0 - p));
  const auto is_kept = first.eq(kept);
  CHECK(at::logical_or(is_kept, first.eq(0.0f)).all().item<bool>());
  const double rate = 1.0 - is_kept.to(at::kDouble).mean().item<double>();
  CHECK(rate == Approx(p).margin(0.005)); // 134,112 draws: the sd is 0.0008

  // The layer's second call draws another mask; the same key, the same two.
  CHECK_FALSE(same_bits(first, second));
  CHECK(same_bits(layer.forward(x, ctx), y));
  two_dropouts other_instance(2, p);
  CHECK(same_bits(other_instance.forward(x, ctx), y));
  // Another step, micro-batch or layer: other masks.
  CHECK_FALSE(same_bits(layer.forward(x, {7, 4, 1, true}), y));
  CHECK_FALSE(same_bits(layer.forward(x, {7, 3, 2, true}), y));
  CHECK_FALSE(same_bits(two_dropouts(3, p).forward(x, ctx), y));
  // Evaluation passes the input through.
  CHECK(same_bits(layer.forward(x, {7, 3, 1, false})[0], x));
}

TEST_CASE("a transformer block told to stop returns an undefined tensor - and the "
          "same output as without a flag when not told",
          "[model]") {
  transformer_block block(1, 11, 32, 4, 4, true, 0.1);
  const auto x = at::randn({2, 16, 32});
  std::atomic<bool> stop{false};
  const layer_ctx plain{7, 3, 1, true};
  const layer_ctx watched{7, 3, 1, true, &stop};
  CHECK(same_bits(block.forward(x, watched), block.forward(x, plain)));
  stop = true;
  CHECK_FALSE(block.forward(x, watched).defined());
  CHECK(block.forward(x, plain).defined()); // a forward without the flag runs on
}

TEST_CASE("a transformer block computes textbook causal attention and its MLP - "
          "output and gradients - head by head from its own parameters",
          "[model]") {
  const int d = 32, heads = 4, hd = d / heads;
  transformer_block block(1, 5, d, heads, 4, true, 0.1);
  std::map<std::string, at::Tensor> w;
  for (const auto& p : block.params())
    w[p.name] = p.tensor;
  const auto x = at::randn({2, 16, d}).requires_grad_(true);
  const layer_ctx eval{7, 3, 1, false}; // no dropout: the plain function
  auto ours = block.forward(x, eval);

  // The reference: one head at a time, the scale on the scores, the mask as -inf.
  const auto x_ref = x.detach().clone().requires_grad_(true);
  const auto t = x.size(1);
  auto a = at::layer_norm(x_ref, {d}, w["ln1.weight"], w["ln1.bias"]);
  auto qkv = at::linear(a, w["attn.qkv.weight"], w["attn.qkv.bias"]);
  const auto future = at::ones({t, t}, at::kBool).triu(1);
  std::vector<at::Tensor> outs;
  for (int h = 0; h < heads; ++h) {
    auto q = qkv.narrow(2, h * hd, hd), k = qkv.narrow(2, d + h * hd, hd),
         v = qkv.narrow(2, 2 * d + h * hd, hd);
    auto s = at::matmul(q, k.transpose(1, 2)) / std::sqrt(double(hd));
    outs.push_back(at::matmul(at::softmax(s.masked_fill(future, -INFINITY), -1), v));
  }
  auto h1 =
      x_ref + at::linear(at::cat(outs, 2), w["attn.proj.weight"], w["attn.proj.bias"]);
  auto m = at::gelu(at::linear(at::layer_norm(h1, {d}, w["ln2.weight"], w["ln2.bias"]),
                               w["mlp.fc1.weight"], w["mlp.fc1.bias"]));
  auto ref = h1 + at::linear(m, w["mlp.fc2.weight"], w["mlp.fc2.bias"]);
  CHECK(at::allclose(ours, ref, 1e-5, 1e-5));

  const auto g = at::randn(ours.sizes());
  ours.backward(g);
  const auto qkv_grad = w["attn.qkv.weight"].grad().clone();
  w["attn.qkv.weight"].grad().zero_();
  ref.backward(g);
  CHECK(at::allclose(x.grad(), x_ref.grad(), 1e-5, 1e-5));
  CHECK(at::allclose(qkv_grad, w["attn.qkv.weight"].grad(), 1e-5, 1e-5));
}
