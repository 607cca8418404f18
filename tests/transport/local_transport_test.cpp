#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "transport/local_transport.hpp"

using namespace bamboo;
using namespace std::chrono_literals;

TEST_CASE("the local transport hands a tensor over without a copy", "[transport]") {
  auto hub = std::make_shared<local_hub>(2, 1);
  auto a = hub->endpoint(0), b = hub->endpoint(1);
  auto t = at::arange(6, at::kFloat);
  REQUIRE(a->send(1, 42, t));
  at::Tensor got;
  REQUIRE(b->recv(0, 42, got, 1s));
  CHECK(got.data_ptr() == t.data_ptr());
  CHECK(hub->pending() == 0);
  CHECK(b->generation() == 1);
}

TEST_CASE("the local transport matches by source and tag", "[transport]") {
  auto hub = std::make_shared<local_hub>(3, 1);
  auto a = hub->endpoint(0), b = hub->endpoint(1), c = hub->endpoint(2);
  REQUIRE(a->send(2, 7, at::ones({1})));
  REQUIRE(b->send(2, 7, at::zeros({1})));
  at::Tensor x;
  REQUIRE(c->recv(1, 7, x, 1s));
  CHECK(x.item<float>() == 0.0f);
  REQUIRE(c->recv(0, 7, x, 1s));
  CHECK(x.item<float>() == 1.0f);
  CHECK(c->recv(0, 8, x, 20ms).code == transport_errc::timeout);
  CHECK(a->send(0, 1, x).code == transport_errc::invalid);
  CHECK(a->send(5, 1, x).code == transport_errc::invalid);
}

TEST_CASE("a recv times out at its deadline", "[transport]") {
  auto hub = std::make_shared<local_hub>(2, 1);
  auto b = hub->endpoint(1);
  at::Tensor x;
  auto start = std::chrono::steady_clock::now();
  auto st = b->recv(0, 1, x, 50ms);
  auto waited = std::chrono::steady_clock::now() - start;
  CHECK(st.code == transport_errc::timeout);
  CHECK(waited >= 50ms);
  CHECK(waited < 2s);
}

TEST_CASE("abort releases a recv seen blocked, at once, and fails later calls",
          "[transport]") {
  auto hub = std::make_shared<local_hub>(2, 3);
  auto a = hub->endpoint(0), b = hub->endpoint(1);
  transport_status st;
  std::chrono::steady_clock::duration waited{};
  std::thread waiter([&] {
    at::Tensor x;
    auto start = std::chrono::steady_clock::now();
    st = b->recv(0, 1, x, 30s);
    waited = std::chrono::steady_clock::now() - start;
  });
  // Abort only once the recv is blocked (no sleep: a recv that had not begun
  // yet would pass without testing the release of a blocked one).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (b->blocked_receives() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(b->blocked_receives() == 1);
  a->abort("generation 3 is over");
  waiter.join();
  CHECK(st.code == transport_errc::aborted);
  CHECK(st.detail == "generation 3 is over");
  CHECK(waited < 5s);
  CHECK(a->send(1, 2, at::ones({1})).code == transport_errc::aborted);
}
