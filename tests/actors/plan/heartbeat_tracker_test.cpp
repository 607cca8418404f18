#include <catch2/catch.hpp>

#include "actors/plan/heartbeat_tracker.hpp"

using namespace bamboo;
using ms = std::chrono::milliseconds;

TEST_CASE("the heartbeat tracker names nodes silent for too long", "[actors][plan]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  t.watch(0, t0);
  t.watch(1, t0);
  t.seen(0, t0 + ms(100));
  t.seen(0, t0 + ms(300));
  t.seen(1, t0 + ms(100));
  CHECK(t.expired(t0 + ms(450), ms(200), ms(200)) == std::vector<int>{1});
  CHECK(t.max_gap(0) == ms(200));
  t.forget(1);
  CHECK(t.expired(t0 + ms(450), ms(200), ms(200)).empty());
}

TEST_CASE("a watcher whose own tick comes late was paused - that much of every node's "
          "silence is forgiven - and an on-time tick changes nothing",
          "[actors][plan]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  t.watch(0, t0);
  t.watch(1, t0);
  CHECK(t.tick(t0 + ms(200), ms(200), ms(400)) == ms(0)); // the first tick
  t.seen(0, t0 + ms(200));
  t.seen(1, t0 + ms(200));
  // Stopped for 3 s: the next tick comes 3 s after the last, and nobody is lost
  // for it (2.8 s forgiven: the gap less the 200 ms period of an on-time tick).
  CHECK(t.tick(t0 + ms(3200), ms(200), ms(400)) == ms(3000));
  CHECK(t.expired(t0 + ms(3200), ms(1000), ms(1000)).empty());
  // The last heartbeat is still what it was (for the gap statistics).
  CHECK(t.last_seen(0) == t0 + ms(200));
  // Heard again within its timeout less a period after the pause: not lost.
  CHECK(t.expired(t0 + ms(3200 + 790), ms(1000), ms(1000)).empty());
  // From the pause on, silence counts again: node 1 stays silent, node 0 beats.
  // Node 1's silence: 4300 - 200 - 2800 = 1300 ms.
  t.seen(0, t0 + ms(3900));
  for (int at : {3500, 3800, 4100, 4300})
    CHECK(t.tick(t0 + ms(at), ms(200), ms(400)) == ms(0));
  CHECK(t.expired(t0 + ms(4300), ms(1000), ms(1000)) == std::vector<int>{1});
}

TEST_CASE("a watcher whose every tick is a little late still finds a stopped node",
          "[actors][plan]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  t.watch(0, t0);
  t.watch(1, t0);
  // Ticks due every 200 ms come every 450 ms, where 400 may pass unnoticed:
  // each counts 200 ms of node 1's silence, so it is found on the sixth.
  bool lost = false;
  int at = 0;
  for (int i = 1; i <= 10 && !lost; ++i) {
    at = 450 * i;
    t.tick(t0 + ms(at), ms(200), ms(400));
    t.seen(0, t0 + ms(at)); // node 0 beats; node 1 stopped at t0
    lost = t.expired(t0 + ms(at), ms(1000), ms(1000)) == std::vector<int>{1};
  }
  INFO("node 1 found lost at " << at << " ms");
  CHECK(lost);
  CHECK(at <= 6 * 450);
}

TEST_CASE("nodes of one process silent together are a stall of that process until the "
          "stall timeout - and one silent node among beating ones is a loss",
          "[actors][plan]") {
  heartbeat_tracker t;
  auto t0 = heartbeat_tracker::clock::now();
  for (int n = 0; n < 4; ++n)
    t.watch(n, t0, 0);
  t.watch(9, t0); // a worker process of its own
  for (int n = 0; n < 4; ++n)
    t.seen(n, t0 + ms(100 + 10 * n));
  // 1.5 s later all four are silent: a stall, not four losses; node 9 (its own
  // process, silent as long) is lost.
  const auto at = t0 + ms(1600);
  CHECK(t.expired(at, ms(1000), ms(30000)) == std::vector<int>{9});
  CHECK(t.stalled(at, ms(1000)) == std::vector<int>{0});
  // A stall that outlasts its own timeout is a loss after all.
  CHECK(t.expired(t0 + ms(40000), ms(1000), ms(30000)) ==
        std::vector<int>{0, 1, 2, 3, 9});
  // One node of the group beats: the silent ones are lost, not stalled.
  t.seen(2, at);
  CHECK(t.stalled(at, ms(1000)).empty());
  CHECK(t.expired(at, ms(1000), ms(30000)) == std::vector<int>{0, 1, 3, 9});
}

TEST_CASE("the manager's silence a worker waits out is the longer of its timeout and the "
          "nodes' timeout, in heartbeats",
          "[actors][plan]") {
  heartbeat_policy p;
  CHECK(p.timeout() == ms(1000));
  CHECK(p.manager_misses() == 50); // 10 s of 200 ms beats
  p.manager_timeout = ms(1000);
  CHECK(p.manager_misses() == 5);
  p.manager_timeout = ms(100); // never below the nodes' own timeout
  CHECK(p.manager_misses() == 5);
  CHECK(p.late_tick() == ms(500));
}
