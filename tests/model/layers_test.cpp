// The layers' contracts. Dropout's mask: a counter-based hash keyed by (seed, step,
// micro-batch, layer) and the call's place in the layer, so the same key draws the same
// mask on any stage or thread, and the rate and the scale are those asked for. A block
// told to stop (FRC at a step's end) gives up, and computes the same when not.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

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
