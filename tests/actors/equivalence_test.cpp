// The proof of correctness of the pipeline: splitting the model into stages
// changes nothing, to the last bit, against the single-stage run.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "actors/embedded_cluster.hpp"
#include "actors/errors.hpp"
#include "actors/plan/run_record.hpp"

using namespace bamboo;

namespace {

train_config small_config(model_kind kind, int stages, double clip) {
  train_config c;
  c.model.kind = kind;
  c.model.layers = 4;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.seq_len = 32;
  c.model.vocab = 128;
  c.model.dropout = 0.1; // seeded per (step, micro-batch, layer): must not matter
  c.stages = stages;
  c.micro_batch = 2;
  c.global_batch = 8;
  c.steps = 10;
  c.seed = 11;
  c.threads = 1;
  c.optim.clip_norm = clip;
  return c;
}

// Parameters and AdamW moments by global name; the per-stage step counters
// ("stageN#steps") depend on S and are checked on their own.
std::vector<param_blob> tensors_only(std::vector<param_blob> blobs, std::int64_t steps) {
  std::vector<param_blob> out;
  for (auto& b : blobs) {
    if (b.name.rfind("stage", 0) == 0)
      CHECK(b.values.at(0) == static_cast<float>(steps));
    else
      out.push_back(std::move(b));
  }
  return out;
}

run_result run_collecting(const train_config& c) {
  run_options o;
  o.collect_parameters = true;
  auto r = run_embedded(c, o);
  if (!r)
    FAIL("run failed: " << describe(r.error()));
  r->parameters = tensors_only(std::move(r->parameters), c.steps);
  return std::move(*r);
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

void check_identical(const run_result& ref, const run_result& got) {
  REQUIRE(got.steps.size() == ref.steps.size());
  for (std::size_t k = 0; k < ref.steps.size(); ++k) {
    INFO("step " << k);
    CHECK(got.steps[k].loss == ref.steps[k].loss);
  }
  REQUIRE(got.parameters.size() == ref.parameters.size());
  for (std::size_t i = 0; i < ref.parameters.size(); ++i) {
    INFO(ref.parameters[i].name);
    REQUIRE(got.parameters[i].name == ref.parameters[i].name);
    CHECK(bit_equal(got.parameters[i].values, ref.parameters[i].values));
  }
}

} // namespace

TEST_CASE("GPT losses and parameters of S=2 and S=4 equal S=1 to the last bit",
          "[actors]") {
  auto ref = run_collecting(small_config(model_kind::gpt, 1, 0.0));
  CHECK(ref.steps.back().loss < ref.steps.front().loss);
  CHECK(ref.parameters.size() == 3 * (4 * 12 + 2 + 4)); // weights, exp_avg, exp_avg_sq
  check_identical(ref, run_collecting(small_config(model_kind::gpt, 2, 0.0)));
  check_identical(ref, run_collecting(small_config(model_kind::gpt, 4, 0.0)));
}

TEST_CASE("BERT losses and parameters of S=2 and S=4 equal S=1 to the last bit",
          "[actors]") {
  auto ref = run_collecting(small_config(model_kind::bert, 1, 0.0));
  CHECK(ref.steps.back().loss < ref.steps.front().loss);
  check_identical(ref, run_collecting(small_config(model_kind::bert, 2, 0.0)));
  check_identical(ref, run_collecting(small_config(model_kind::bert, 4, 0.0)));
}

TEST_CASE("with clipping, S=2, 3 and 4 equal one stage to the last bit - the global "
          "norm summed tensor by tensor in layer order whatever the boundaries",
          "[actors]") {
  for (auto kind : {model_kind::gpt, model_kind::bert}) {
    DYNAMIC_SECTION(to_string(kind)) {
      auto ref = run_collecting(small_config(kind, 1, 0.5));
      // The clip must actually bite for this to test anything.
      CHECK(ref.steps.front().grad_norm > 0.5);
      for (int stages : {2, 3, 4}) {
        INFO("S=" << stages);
        auto got = run_collecting(small_config(kind, stages, 0.5));
        for (std::size_t k = 0; k < ref.steps.size(); ++k)
          CHECK(got.steps[k].grad_norm == ref.steps[k].grad_norm);
        check_identical(ref, got);
      }
    }
  }
}

TEST_CASE("the same seed gives the same run, another seed another", "[actors]") {
  auto a = run_collecting(small_config(model_kind::gpt, 2, 1.0));
  auto b = run_collecting(small_config(model_kind::gpt, 2, 1.0));
  check_identical(a, b);
  auto other = small_config(model_kind::gpt, 2, 1.0);
  other.seed = 12;
  CHECK(run_collecting(other).steps.front().loss != a.steps.front().loss);
}

TEST_CASE("the embedded run refuses bad configurations with a reason", "[actors]") {
  auto c = small_config(model_kind::gpt, 7, 0.0); // 6 pipeline layers
  auto r = run_embedded(c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == static_cast<std::uint8_t>(errc::invalid_config));
  CHECK(describe(r.error()).find("exceeds") != std::string::npos);
  c.stages = 2;
  c.data = "/nonexistent/file.bin";
  r = run_embedded(c);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == static_cast<std::uint8_t>(errc::invalid_data));
}
