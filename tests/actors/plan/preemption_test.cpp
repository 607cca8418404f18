#include <catch2/catch.hpp>

#include "actors/plan/preemption.hpp"

using namespace bamboo;

TEST_CASE("preemption options parse, and bad ones are named", "[actors][plan]") {
  std::vector<preempt_spec> kills;
  double rate = 0;
  CHECK_FALSE(parse_preempt("node=2@step=10.op=3", kills, rate));
  CHECK_FALSE(parse_preempt("node=0@step=4", kills, rate));
  CHECK_FALSE(parse_preempt("rate=2.5", kills, rate));
  REQUIRE(kills.size() == 2);
  CHECK(kills[0].node == 2);
  CHECK(kills[0].step == 10);
  CHECK(kills[0].op == 3);
  CHECK(kills[1].op == 0);
  CHECK(rate == 2.5);
  auto bad = parse_preempt("node=x@step=1", kills, rate);
  REQUIRE(bad);
  CHECK(bad->find("node=x@step=1") != std::string::npos);
}

TEST_CASE("Poisson preemptions are seeded and near their rate", "[actors][plan]") {
  auto same = [](const std::vector<preempt_spec>& x, const std::vector<preempt_spec>& y) {
    if (x.size() != y.size())
      return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].node != y[i].node || x[i].step != y[i].step || x[i].op != y[i].op)
        return false;
    return true;
  };
  auto a = poisson_kills(5.0, 10000, 4, 8, 1);
  auto b = poisson_kills(5.0, 10000, 4, 8, 1);
  CHECK(same(a, b)); // the same seed: the same kills, value by value
  CHECK(a.size() > 400);
  CHECK(a.size() < 600);
  for (auto& k : a) {
    CHECK(k.node < 4);
    CHECK(k.op <= 8);
  }
  CHECK_FALSE(same(poisson_kills(5.0, 10000, 4, 8, 2), a)); // another seed, other kills
}

TEST_CASE("the injector fires each kill once, past-the-end at the update",
          "[actors][plan]") {
  preemption_injector inj({{1, 3, 2}, {2, 3, 99}});
  CHECK_FALSE(inj.should_kill(1, 3, 1, 8));
  CHECK(inj.should_kill(1, 3, 2, 8));
  CHECK_FALSE(inj.should_kill(1, 3, 2, 8));
  CHECK_FALSE(inj.should_kill(2, 3, 7, 8));
  CHECK(inj.should_kill(2, 3, 8, 8));
  CHECK(inj.fired().size() == 2);
}
