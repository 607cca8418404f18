#include <catch2/catch.hpp>

#include "actors/plan/heartbeat_tracker.hpp"

using namespace bamboo;

TEST_CASE("the heartbeat tracker names nodes silent for too long", "[actors][plan]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  using ms = std::chrono::milliseconds;
  t.watch(0, t0);
  t.watch(1, t0);
  t.seen(0, t0 + ms(100));
  t.seen(0, t0 + ms(300));
  t.seen(1, t0 + ms(100));
  CHECK(t.expired(t0 + ms(450), ms(200)) == std::vector<int>{1});
  CHECK(t.max_gap(0) == ms(200));
  t.forget(1);
  CHECK(t.expired(t0 + ms(450), ms(200)).empty());
}
