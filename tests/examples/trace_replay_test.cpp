#include <catch2/catch.hpp>

#include "examples/train/trace_replay.hpp"

using namespace bamboo;
using namespace std::chrono_literals;

namespace {
std::vector<sim::trace_event> events(const std::string& text) {
  auto r = sim::parse_trace_text(text, "test");
  REQUIRE(r);
  return r.events;
}
} // namespace

TEST_CASE("a trace replay maps instances onto worker slots first come first served, "
          "leaves out the rest, and divides trace time by the speed-up",
          "[examples]") {
  app::trace_replay replay(events("0,add,a\n0,add,b\n0,add,c\n"
                                  "1000,add,d\n"    // no free slot: left out
                                  "2000,remove,b\n" // frees slot 1
                                  "2000,remove,d\n" // never had a slot
                                  "3000,add,e\n"    // takes slot 1
                                  "10000,remove,a\n"),
                           3, 10.0);
  CHECK(replay.initial_workers() == 3);
  CHECK(replay.due(0.05s).empty()); // trace time 500 ms
  auto a = replay.due(0.2s);        // 2000 ms
  REQUIRE(a.size() == 1);
  CHECK_FALSE(a[0].start);
  CHECK(a[0].slot == 1);
  CHECK(a[0].instance == "b");
  CHECK(replay.due(0.2s).empty()); // each action once
  a = replay.due(0.35s);
  REQUIRE(a.size() == 1);
  CHECK(a[0].start);
  CHECK(a[0].slot == 1);
  CHECK(a[0].instance == "e");
  a = replay.due(5s);
  REQUIRE(a.size() == 1);
  CHECK(a[0].slot == 0);
  CHECK(replay.starts() == 1);
  CHECK(replay.removals() == 2);
  CHECK(replay.left_out() == 2);
  CHECK(replay.replayed_ms() == 10000);
  CHECK(replay.trace_ms() == 10000);
}

TEST_CASE("a trace replay of the AWS p3 trace on 8 workers starts with 8 and keeps at "
          "most 8",
          "[examples]") {
  auto r = sim::load_trace(std::string(BAMBOO_TRACES_DIR) + "/aws-p3-trace.csv");
  REQUIRE(r);
  app::trace_replay replay(r.events, 8, 1.0);
  CHECK(replay.initial_workers() == 8);
  int live = 8, most = 8;
  for (const auto& a : replay.due(std::chrono::hours(24))) {
    live += a.start ? 1 : -1;
    most = std::max(most, live);
    CHECK(live >= 0);
  }
  CHECK(most == 8);
  CHECK(replay.replayed_ms() == replay.trace_ms());
}
