// A trainer's own model through the model interface: a convolutional
// classifier (examples/custom_trainer) with a different tensor shape at each
// stage boundary trains to the same bits on any depth, in process and over
// Gloo sockets (whose receive buffers come from the model's boundaries), and
// through a failover; a model with a mistake is refused by name before any
// actor starts.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <mutex>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "actors/net/wire_values.hpp"
#include "examples/custom_trainer/conv_classifier.hpp"
#include "tests/scratch_dir.hpp"

using namespace bamboo;

namespace {

train_config conv_config(int stages) {
  train_config c;
  c.custom_model = std::make_shared<conv_example::conv_classifier>(256);
  c.stages = stages;
  c.micro_batch = 4;
  c.global_batch = 16;
  c.steps = 4;
  c.seed = 3;
  c.threads = 1;
  c.redundancy = redundancy_mode::eager;
  return c;
}

std::vector<double> losses(const train_config& c, run_options o = {}) {
  o.collect_parameters = true;
  auto r = run_embedded(c, o);
  if (!r)
    FAIL("run failed: " << describe(r.error()));
  std::vector<double> out;
  for (const auto& s : r->steps)
    out.push_back(s.loss);
  return out;
}

// A model whose second convolution expects 3 channels where the first gives 8.
class mismatched : public conv_example::conv_classifier {
protected:
  layer_ptr make_layer(int i, std::uint64_t seed) const override {
    if (i == 1)
      return std::make_shared<conv_example::conv_layer>(i, seed, 3, 16, 2, 0.0);
    return conv_classifier::make_layer(i, seed);
  }
};

// A loss without the reduction: one value per image.
class per_image_loss : public conv_example::conv_classifier {
public:
  at::Tensor loss(const at::Tensor& logits, const at::Tensor& target) const override {
    return at::cross_entropy_loss(logits, target, {}, at::Reduction::None);
  }
};

std::string refusal(train_config c) {
  auto r = run_embedded(c, {});
  REQUIRE_FALSE(r);
  CHECK(is_error(r.error(), errc::invalid_config));
  return describe(r.error());
}

} // namespace

TEST_CASE("a custom convolutional model trains to the same bits on 1 and 3 stages - "
          "over Gloo sockets and through a failover",
          "[model]") {
  const auto one = losses(conv_config(1));
  REQUIRE(one.size() == 4);
  CHECK(one.back() < one.front()); // it learns
  CHECK(losses(conv_config(3)) == one);
  run_options gloo;
  gloo.transport = transport_kind::gloo; // buffers of [4,8,16,16] and [4,16,8,8]
  CHECK(losses(conv_config(3), gloo) == one);
  run_options kill;
  kill.preemptions = {{1, 2, 2}}; // node 1 in step 2, before instruction 2
  CHECK(losses(conv_config(3), kill) == one);
  auto two = conv_config(2);
  two.pipelines = 2; // and on 2 pipelines: within rounding of one sum
  const auto p2 = losses(two);
  for (std::size_t k = 0; k < one.size(); ++k)
    CHECK(std::abs(p2[k] - one[k]) <= 1e-5 * std::abs(one[k]));
}

TEST_CASE("a custom model with a mistake is refused by name before training", "[model]") {
  auto c = conv_config(2);
  c.custom_model = std::make_shared<mismatched>();
  CHECK(refusal(c).find("model 'conv-classifier': layer 1 cannot take the output of "
                        "layer 0, [4, 8, 16, 16] Float") != std::string::npos);
  c.custom_model = std::make_shared<conv_example::conv_classifier>(0);
  CHECK(refusal(c).find("model 'conv-classifier''s dataset has no samples") !=
        std::string::npos);
  c.custom_model = std::make_shared<per_image_loss>();
  CHECK(refusal(c).find("the loss returns [4] Float, not a scalar") != std::string::npos);
  c = conv_config(5);
  CHECK(
      refusal(c).find("--stages 5 exceeds model 'conv-classifier''s 4 pipeline layers") !=
      std::string::npos);
}

TEST_CASE("a trainer's hooks hear of each failover with its cost and of each "
          "checkpoint once it is on disk",
          "[model]") {
  bamboo::test::scratch_dir dir;
  auto c = conv_config(3);
  c.steps = 5;
  run_options o;
  o.preemptions = {{2, 1, 1}};
  o.checkpoints.dir = dir.path();
  o.checkpoints.every = 2;
  std::vector<failover_record> failovers;
  std::mutex mtx;
  std::vector<std::int64_t> written;
  o.on_failover = [&](const failover_record& f) { failovers.push_back(f); };
  o.on_checkpoint = [&](std::int64_t step, const std::string& at) {
    std::lock_guard<std::mutex> guard{mtx};
    written.push_back(step);
    CHECK(std::filesystem::exists(std::filesystem::path(at) / "manifest.json"));
  };
  auto r = run_embedded(c, o);
  REQUIRE(r);
  REQUIRE(failovers.size() == 1);
  CHECK(failovers[0].node == 2);
  CHECK(failovers[0].step == 1);
  CHECK(failovers[0].latency_s > 0);
  CHECK(written == std::vector<std::int64_t>{2, 4, c.steps}); // and the last step's
}

TEST_CASE("a worker's model is told apart from the manager's by name and digest - and "
          "a run's settings name a custom model that only its own build takes",
          "[model]") {
  auto run = std::make_shared<conv_example::conv_classifier>(256);
  const auto digest = model_digest(*run);
  CHECK(digest.size() == 16);
  // Another build of the same model agrees; a different dataset or layer does not.
  CHECK(model_digest(conv_example::conv_classifier(256)) == digest);
  CHECK(model_digest(conv_example::conv_classifier(512)) != digest);
  CHECK(model_digest(conv_example::conv_classifier(256, 8)) != digest); // other images

  CHECK_FALSE(model_mismatch(nullptr, "", "")); // GPT and BERT: every worker builds them
  CHECK_FALSE(model_mismatch(run, "conv-classifier", digest));
  CHECK(model_mismatch(run, "", "")
            ->find("not registered on this worker (it builds gpt "
                   "and bert only") != std::string::npos);
  CHECK(model_mismatch(run, "mixer", digest)->find("its model is 'mixer'") !=
        std::string::npos);
  CHECK(model_mismatch(run, "conv-classifier", "0123456789abcdef")
            ->find("built differently on this worker (digest 0123456789abcdef, the "
                   "manager's " +
                   digest + ")") != std::string::npos);

  auto cfg = conv_config(2);
  cfg.custom_model = run;
  const auto settings = to_settings(cfg);
  CHECK(settings.model == "conv-classifier");
  CHECK(settings.model_digest == digest);
  std::string problem;
  auto back = from_settings(settings, problem, run);
  REQUIRE(back);
  CHECK(back->custom_model == run);
  CHECK_FALSE(from_settings(settings, problem)); // a stock worker
  CHECK(problem == "model 'conv-classifier' is not registered on this worker");
  CHECK_FALSE(from_settings(settings, problem,
                            std::make_shared<conv_example::conv_classifier>()));
  CHECK(problem.find("built differently on this worker") != std::string::npos);
}
