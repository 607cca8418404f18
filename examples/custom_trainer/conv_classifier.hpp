// A model bamboo does not ship: a small convolutional classifier of 16x16
// images (three 3x3 convolutions, then a linear head over 10 classes) on a
// seeded synthetic dataset, with its own loss. Written against the installed
// headers only, as a trainer's own model would be; the tests use it too.
//
// Each boundary has its own shape: [m,1,16,16] in, [m,8,16,16], [m,16,8,8],
// [m,32,4,4], and [m,10] logits out.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/model_definition.hpp"
#include "model/rng.hpp"

namespace conv_example {

inline constexpr int image_side = 16;
inline constexpr int classes = 10;

// 3x3 convolution (padding 1), ReLU, dropout: [m, in, H, W] -> [m, out, H/s, W/s].
class conv_layer : public bamboo::pipeline_layer {
public:
  conv_layer(int index, std::uint64_t seed, int in, int out, int stride, double dropout)
      : pipeline_layer(index), stride_(stride), p_(dropout) {
    auto gen = init_generator(seed); // (seed, layer index): the same on any stage
    w_ = normal_param("conv.weight", {out, in, 3, 3}, std::sqrt(2.0 / (9.0 * in)), gen);
    b_ = constant_param("conv.bias", {out}, 0.0);
  }
  at::Tensor forward(const at::Tensor& x, const bamboo::layer_ctx& ctx) override {
    auto y = at::relu(at::conv2d(x, w_, b_, {stride_, stride_}, {1, 1}));
    auto gen = dropout_generator(ctx); // (seed, step, micro-batch, layer)
    return dropout(y, p_, ctx, gen);
  }

private:
  std::int64_t stride_;
  double p_;
  at::Tensor w_, b_;
};

// Flatten, then a linear map to the class logits: [m, C, H, W] -> [m, classes].
class classifier_head : public bamboo::pipeline_layer {
public:
  classifier_head(int index, std::uint64_t seed, int features) : pipeline_layer(index) {
    auto gen = init_generator(seed);
    w_ = normal_param("fc.weight", {classes, features}, 0.02, gen);
    b_ = constant_param("fc.bias", {classes}, 0.0);
  }
  at::Tensor forward(const at::Tensor& x, const bamboo::layer_ctx&) override {
    return at::linear(x.flatten(1), w_, b_);
  }

private:
  at::Tensor w_, b_;
};

class conv_classifier : public bamboo::model_definition {
public:
  // `samples` images; `data_seed` fixes them (independent of the run's seed).
  explicit conv_classifier(std::int64_t samples = 1024, std::uint64_t data_seed = 7,
                           double dropout = 0.1)
      : samples_(samples), data_seed_(data_seed), dropout_(dropout) {}

  std::string name() const override { return "conv-classifier"; }
  int pipeline_layers() const override { return 4; }
  // Multiply-adds per image of each layer.
  std::vector<double> layer_costs() const override {
    return {8 * 1 * 9 * 256.0, 16 * 8 * 9 * 64.0, 32 * 16 * 9 * 16.0, 512 * 10.0};
  }
  std::vector<bamboo::layer_ptr> build_layers(std::uint64_t seed, int first,
                                              int last) const override {
    std::vector<bamboo::layer_ptr> out;
    for (int i = first; i < last; ++i)
      out.push_back(make_layer(i, seed));
    return out;
  }
  std::int64_t samples() const override { return samples_; }
  // Image i shows class i mod 10 as a bright bar (its row and slant set by the
  // class) over seeded noise; the batch depends on the sample numbers alone.
  bamboo::micro_batch make_batch(const std::vector<std::int64_t>& samples, std::uint64_t,
                                 std::int64_t, int) const override {
    const auto m = static_cast<std::int64_t>(samples.size());
    auto input = at::empty({m, 1, image_side, image_side}, at::kFloat);
    auto target = at::empty({m}, at::kLong);
    auto px = input.accessor<float, 4>();
    auto label = target.accessor<std::int64_t, 1>();
    for (std::int64_t b = 0; b < m; ++b) {
      const auto i = samples[static_cast<std::size_t>(b)];
      const int c = static_cast<int>(i % classes);
      bamboo::rng64 noise(bamboo::mix_seed({data_seed_, static_cast<std::uint64_t>(i)}));
      for (int y = 0; y < image_side; ++y)
        for (int x = 0; x < image_side; ++x) {
          const bool bar = (y + (c % 3 - 1) * x / 4 + image_side) % image_side == c + 3;
          px[b][0][y][x] = static_cast<float>((bar ? 1.0 : 0.0) + 0.3 * noise.uniform());
        }
      label[b] = c;
    }
    return {input, target};
  }
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& target) const override {
    return at::cross_entropy_loss(logits, target);
  }

protected:
  virtual bamboo::layer_ptr make_layer(int i, std::uint64_t seed) const {
    switch (i) {
    case 0: return std::make_shared<conv_layer>(i, seed, 1, 8, 1, dropout_);
    case 1: return std::make_shared<conv_layer>(i, seed, 8, 16, 2, dropout_);
    case 2: return std::make_shared<conv_layer>(i, seed, 16, 32, 2, dropout_);
    default: return std::make_shared<classifier_head>(i, seed, 32 * 4 * 4);
    }
  }

private:
  std::int64_t samples_;
  std::uint64_t data_seed_;
  double dropout_;
};

} // namespace conv_example
