#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>
#include <sched.h>

#include "model/frc_worker.hpp"

using namespace bamboo;
using namespace std::chrono_literals;

TEST_CASE("the FRC thread runs what it is given in order and at idle priority",
          "[model]") {
  frc_worker w(1);
  std::vector<int> order;
  int policy = -1;
  for (int j = 0; j < 4; ++j)
    w.submit(j, [&, j](const std::atomic<bool>&) {
      order.push_back(j); // one task at a time while the step runs
      policy = sched_getscheduler(0);
      return true;
    });
  // Nothing else runs here, so the idle thread gets a core: let it finish.
  for (int i = 0; i < 200 && order.size() < 4; ++i)
    std::this_thread::sleep_for(5ms);
  auto s = w.settle(false);
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  CHECK(s.done == std::vector<int>{0, 1, 2, 3});
  CHECK(s.dropped == 0);
  CHECK(s.error.empty());
  CHECK(policy == SCHED_IDLE);
}

TEST_CASE("settling drops the queued FRC or finishes it on two threads", "[model]") {
  frc_worker w(1);
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  std::atomic<bool> started{false};
  // The first task holds the worker until released (it never looks at its
  // stop flag, so it runs to its end): the rest stay queued.
  w.submit(0, [&](const std::atomic<bool>&) {
    started = true;
    while (!release)
      std::this_thread::sleep_for(1ms);
    ++ran;
    return true;
  });
  for (int j = 1; j < 4; ++j)
    w.submit(j, [&](const std::atomic<bool>&) { return ++ran > 0; });
  while (!started)
    std::this_thread::sleep_for(1ms);
  SECTION("a completed step drops what has not begun") {
    std::thread releaser([&] {
      std::this_thread::sleep_for(20ms);
      release = true;
    });
    auto s = w.settle(false);
    releaser.join();
    CHECK(s.done == std::vector<int>{0});
    CHECK(s.dropped == 3);
    CHECK(ran == 1);
    CHECK(s.spill_seconds > 0);
  }
  SECTION("an interrupted step finishes all of it, the caller helping") {
    const auto caller = std::this_thread::get_id();
    std::atomic<int> on_caller{0};
    w.submit(4, [&](const std::atomic<bool>& stop) {
      if (std::this_thread::get_id() == caller)
        ++on_caller;
      release = true;
      return !stop; // finishing: nothing is told to stop
    });
    auto s = w.settle(true);
    CHECK(ran == 4);
    CHECK(s.done.size() == 5);
    CHECK(s.dropped == 0);
    CHECK(on_caller == 1); // the worker was still held by task 0
  }
  // Settled, the worker takes the next step's work again.
  w.submit(9, [&](const std::atomic<bool>&) { return ++ran > 0; });
  CHECK(w.settle(true).done == std::vector<int>{9});
}

TEST_CASE("an FRC task that throws is reported by settle and the worker goes on",
          "[model]") {
  frc_worker w(1);
  w.submit(
      2, [](const std::atomic<bool>&) -> bool { throw std::runtime_error("bad shape"); });
  w.submit(3, [](const std::atomic<bool>&) { return true; });
  auto s = w.settle(true);
  CHECK(s.error == "FRC of micro-batch 2: bad shape");
  CHECK(s.done == std::vector<int>{3});
}

TEST_CASE("settling a completed step stops the running FRC at its next check - "
          "not at its end",
          "[model]") {
  frc_worker w(1);
  std::atomic<bool> started{false};
  std::atomic<int> checks{0};
  // A forward of 10 s in 1 ms layers, checking its flag between them.
  w.submit(5, [&](const std::atomic<bool>& stop) {
    started = true;
    for (int layer = 0; layer < 10000; ++layer, ++checks) {
      if (stop)
        return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  });
  w.submit(6, [](const std::atomic<bool>&) { return true; });
  while (!started)
    std::this_thread::sleep_for(1ms);
  const auto t0 = std::chrono::steady_clock::now();
  auto s = w.settle(false);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  CHECK(checks < 5000);
  CHECK(s.done.empty());
  CHECK(s.stopped == 1);
  CHECK(s.dropped == 1);
  // The flag is down again for the next step's work.
  w.submit(7, [](const std::atomic<bool>& stop) { return !stop; });
  CHECK(w.settle(true).done == std::vector<int>{7});
}
