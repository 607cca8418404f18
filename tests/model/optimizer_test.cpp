// LibTorch first: its glog CHECK macro must not replace Catch's.
#include <ATen/ATen.h>
#include <torch/optim/adamw.h>

#include <catch2/catch.hpp>

#include "actors/plan/run_record.hpp"
#include "model/optimizer.hpp"

using namespace bamboo;

TEST_CASE("our AdamW matches torch::optim::AdamW step for step", "[model]") {
  optimizer_config o;
  o.lr = 1e-2;
  o.warmup_steps = 0;
  o.min_lr_ratio = 1.0; // constant learning rate, as torch's optimizer has
  o.weight_decay = 0.1;
  torch::manual_seed(0);
  auto init = torch::randn({5, 7});
  auto ours = init.clone().requires_grad_(true);
  auto theirs = init.clone().requires_grad_(true);
  adamw opt({{"w", ours}}, o, 10);
  torch::optim::AdamW ref({theirs}, torch::optim::AdamWOptions(o.lr)
                                        .betas({o.beta1, o.beta2})
                                        .eps(o.eps)
                                        .weight_decay(o.weight_decay));
  for (int k = 0; k < 5; ++k) {
    auto g = torch::randn({5, 7});
    ours.mutable_grad() = g.clone();
    theirs.mutable_grad() = g.clone();
    opt.step(k, 1.0);
    ref.step();
    ref.zero_grad();
    CHECK(torch::allclose(ours, theirs, 1e-6, 1e-7));
  }
  CHECK(opt.steps_taken() == 5);
  CHECK_FALSE(ours.grad().defined());
}

TEST_CASE("the learning rate warms up linearly, then decays by a cosine", "[model]") {
  optimizer_config o;
  o.lr = 1.0;
  o.warmup_steps = 4;
  o.min_lr_ratio = 0.1;
  CHECK(learning_rate(o, 0, 20) == Approx(0.25));
  CHECK(learning_rate(o, 3, 20) == Approx(1.0));
  CHECK(learning_rate(o, 4, 20) == Approx(1.0));
  CHECK(learning_rate(o, 12, 20) == Approx(0.55));
  CHECK(learning_rate(o, 20, 20) == Approx(0.1));
}

TEST_CASE("clipping scales the gradient before the update", "[model]") {
  optimizer_config o;
  o.warmup_steps = 0;
  o.weight_decay = 0;
  auto a = torch::ones({3}).requires_grad_(true);
  auto b = torch::ones({3}).requires_grad_(true);
  adamw oa({{"a", a}}, o, 10), ob({{"b", b}}, o, 10);
  a.mutable_grad() = torch::full({3}, 2.0);
  b.mutable_grad() = torch::full({3}, 1.0);
  CHECK(oa.grad_squares() == Approx(12.0));
  oa.step(0, 0.5);
  ob.step(0, 1.0);
  CHECK(torch::equal(oa.exp_avg()[0], ob.exp_avg()[0]));
}

TEST_CASE("an optimizer loaded from another's flat state takes the same next step "
          "bit for bit, and a flat state of the wrong size is refused",
          "[model]") {
  optimizer_config o;
  o.warmup_steps = 0;
  torch::manual_seed(1);
  auto a = torch::randn({4, 3}).requires_grad_(true);
  auto b = torch::randn({3}).requires_grad_(true);
  adamw src({{"a", a}, {"b", b}}, o, 10);
  for (int k = 0; k < 3; ++k) {
    a.mutable_grad() = torch::randn({4, 3});
    b.mutable_grad() = torch::randn({3});
    src.step(k, 1.0);
  }
  auto a2 = torch::zeros({4, 3}).requires_grad_(true);
  auto b2 = torch::zeros({3}).requires_grad_(true);
  adamw dst({{"a", a2}, {"b", b2}}, o, 10);
  auto flat = src.flat_state();
  CHECK(flat.numel() == 3 * 15);
  CHECK(dst.flat_state_size() == flat.numel());
  CHECK_FALSE(dst.load_flat_state(flat.narrow(0, 0, 44), 3));
  CHECK(dst.steps_taken() == 0);
  REQUIRE(dst.load_flat_state(flat, 3));
  CHECK(dst.steps_taken() == 3);
  CHECK(torch::equal(dst.flat_state(), flat));
  auto ga = torch::randn({4, 3});
  auto gb = torch::randn({3});
  a.mutable_grad() = ga.clone();
  b.mutable_grad() = gb.clone();
  a2.mutable_grad() = ga.clone();
  b2.mutable_grad() = gb.clone();
  src.step(3, 1.0);
  dst.step(3, 1.0);
  CHECK(torch::equal(a, a2));
  CHECK(torch::equal(b, b2));
  CHECK(torch::equal(src.flat_state(), dst.flat_state()));
  // The digest a re-homing copy is checked by sees any flipped bit, tail included.
  auto bytes = src.flat_state().contiguous();
  const auto n = static_cast<std::size_t>(bytes.numel()) * 4;
  const auto before = fnv1a_words(bytes.data_ptr(), n);
  for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
    auto* p = static_cast<unsigned char*>(bytes.data_ptr()) + at;
    *p ^= 1;
    CHECK(fnv1a_words(bytes.data_ptr(), n) != before);
    CHECK(fnv1a_words(bytes.data_ptr(), n - 3) != fnv1a_words(bytes.data_ptr(), n));
    *p ^= 1;
  }
  CHECK(fnv1a_words(bytes.data_ptr(), n) == before);
}
