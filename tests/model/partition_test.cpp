#include <catch2/catch.hpp>

#include <numeric>
#include <stdexcept>

#include "model/config.hpp"
#include "model/model.hpp"
#include "model/partition.hpp"

using namespace bamboo;

TEST_CASE("the partitioner splits layers into contiguous non-empty stages", "[model]") {
  std::vector<double> costs{1, 5, 5, 5, 5, 3};
  for (int s = 1; s <= 6; ++s) {
    auto parts = partition(costs, s);
    REQUIRE(parts.size() == static_cast<std::size_t>(s));
    CHECK(parts.front().first == 0);
    CHECK(parts.back().last == 6);
    double share = 0;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      CHECK(parts[i].size() >= 1);
      if (i > 0)
        CHECK(parts[i].first == parts[i - 1].last);
      share += parts[i].share;
    }
    CHECK(share == Approx(1.0));
  }
}

TEST_CASE("the partitioner minimises the most expensive stage", "[model]") {
  // Optimal split of {1,5,5,5,5,3} into 2: [1,5,5 | 5,5,3] with bottleneck 13.
  auto parts = partition({1, 5, 5, 5, 5, 3}, 2);
  CHECK(parts[0].last == 3);
  CHECK(std::max(parts[0].cost, parts[1].cost) == 13);
  // Into 3: {1,5 | 5,5 | 5,3}: bottleneck 10, the best possible.
  auto three = partition({1, 5, 5, 5, 5, 3}, 3);
  double worst = 0;
  for (auto& p : three)
    worst = std::max(worst, p.cost);
  CHECK(worst == 10);
}

TEST_CASE("the partitioner rejects more stages than layers", "[model]") {
  CHECK_THROWS_AS(partition({1, 2}, 3), std::invalid_argument);
  CHECK_THROWS_AS(partition({1, 2}, 0), std::invalid_argument);
}

TEST_CASE("layer costs cover embedding, every block and the head", "[model]") {
  model_config m;
  m.layers = 6;
  auto costs = layer_costs(m);
  REQUIRE(costs.size() == 8);
  CHECK(costs[1] == costs[6]);
  CHECK(costs[0] < costs[1]);
  CHECK(describe(partition(costs, 2)).find("stage 1: layers [") != std::string::npos);
}
