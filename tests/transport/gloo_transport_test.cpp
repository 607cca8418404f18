// The Gloo backend between two ranks in one process, over 127.0.0.1.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "transport/gloo_transport.hpp"
#include "transport/transport_registry.hpp"

using namespace bamboo;
using namespace std::chrono_literals;

namespace {

struct pair_of_ranks {
  std::unique_ptr<gloo_transport> a, b;
};

pair_of_ranks join_pair(const gloo_store_server& server, std::uint64_t generation) {
  pair_of_ranks p;
  std::string ea, eb;
  gloo_group_spec sa{"127.0.0.1", server.port(), 0, 2, generation, 10s};
  gloo_group_spec sb{"127.0.0.1", server.port(), 1, 2, generation, 10s};
  std::thread t([&] { p.b = gloo_transport::join(sb, eb); });
  p.a = gloo_transport::join(sa, ea);
  t.join();
  INFO(ea << " / " << eb);
  REQUIRE(p.a);
  REQUIRE(p.b);
  return p;
}

} // namespace

TEST_CASE("the gloo transport moves tensors between two ranks", "[transport]") {
  gloo_store_server server;
  auto p = join_pair(server, 1);
  CHECK(p.b->generation() == 1);
  auto x = at::arange(4096, at::kFloat).reshape({64, 64});
  const auto tag = make_tag(3, 1, tensor_kind::activation);
  REQUIRE(p.a->send(1, tag, x));
  at::Tensor y = at::empty({64, 64});
  auto st = p.b->recv(0, tag, y, 5s);
  INFO(st.detail);
  REQUIRE(st);
  CHECK(at::equal(x, y));
  // And back, as a gradient would go.
  REQUIRE(p.b->send(0, make_tag(3, 1, tensor_kind::gradient), y * 2));
  at::Tensor z = at::empty({64, 64});
  REQUIRE(p.a->recv(1, make_tag(3, 1, tensor_kind::gradient), z, 5s));
  CHECK(at::equal(z, x * 2));
  CHECK(p.a->flush(5s));
}

TEST_CASE("a gloo recv fails at its deadline, and abort releases it at once",
          "[transport]") {
  gloo_store_server server;
  auto p = join_pair(server, 1);
  at::Tensor y = at::empty({16});
  auto start = std::chrono::steady_clock::now();
  auto st = p.b->recv(0, 77, y, 300ms);
  CHECK(st.code == transport_errc::timeout);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // Gloo closes a pair whose operation timed out: a timeout ends the group,
  // and the next generation gets a fresh one.
  p = join_pair(server, 2);

  transport_status blocked;
  std::chrono::steady_clock::duration waited{};
  std::thread waiter([&] {
    auto t0 = std::chrono::steady_clock::now();
    blocked = p.a->recv(1, 78, y, 30s);
    waited = std::chrono::steady_clock::now() - t0;
  });
  // Abort only once the recv is blocked in Gloo's wait (no sleep standing in).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (p.a->blocked_receives() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  REQUIRE(p.a->blocked_receives() == 1);
  p.a->abort("generation 1 ended");
  waiter.join();
  CHECK(blocked.code == transport_errc::aborted);
  CHECK(blocked.detail == "generation 1 ended");
  CHECK(waited < 3s);
  CHECK(p.a->send(1, 79, y).code == transport_errc::aborted);
}

TEST_CASE("a new generation forms a fresh gloo group on the same store", "[transport]") {
  gloo_store_server server;
  auto first = join_pair(server, 1);
  first.a->abort("re-plan");
  first.b->abort("re-plan");
  auto second = join_pair(server, 2);
  auto x = at::ones({8});
  REQUIRE(second.b->send(0, 5, x));
  at::Tensor y = at::zeros({8});
  REQUIRE(second.a->recv(1, 5, y, 5s));
  CHECK(at::equal(x, y));
}

TEST_CASE("two threads sharing one gloo endpoint send and receive at once",
          "[transport]") {
  // A worker's stage actor and its shadow actor share their rank's endpoint.
  gloo_store_server server;
  auto p = join_pair(server, 1);
  constexpr int n = 300;
  // Catch's assertions are not thread-safe: count failures, check them here.
  auto run = [](gloo_transport& self, int peer, int recv_base, int send_base) {
    std::atomic<int> bad{0};
    std::thread sender([&] {
      for (int i = 0; i < n; ++i)
        if (!self.send(peer, send_base + i, at::full({256}, static_cast<float>(i))))
          ++bad;
    });
    for (int i = 0; i < n; ++i) {
      at::Tensor y = at::empty({256});
      if (!self.recv(peer, recv_base + i, y, 10s) || y[0].item<float>() != i)
        ++bad;
    }
    sender.join();
    return bad.load();
  };
  int bad_b = 0;
  std::thread other([&] { bad_b = run(*p.b, 0, 1000, 2000); });
  CHECK(run(*p.a, 1, 2000, 1000) == 0);
  other.join();
  CHECK(bad_b == 0);
  CHECK(p.a->flush(10s));
  CHECK(p.b->flush(10s));
}

TEST_CASE("an abort that races a recv starting on another thread never leaves it "
          "waiting for its timeout",
          "[transport]") {
  // The window: a recv that checked "not aborted" but had not yet registered
  // its work when abort() went through the pending works. 300 races, each with
  // a fresh group and the abort a few microseconds after the recv starts; a
  // missed one would wait its 20 s timeout instead of < 2 s.
  gloo_store_server server;
  int slow = 0, not_aborted = 0;
  std::mt19937 rng(3);
  for (int g = 1; g <= 300; ++g) {
    auto p = join_pair(server, static_cast<std::uint64_t>(g));
    transport_status st;
    std::chrono::steady_clock::duration waited{};
    std::atomic<bool> started{false};
    std::thread waiter([&] {
      at::Tensor y = at::empty({16});
      const auto t0 = std::chrono::steady_clock::now();
      started = true;
      st = p.a->recv(1, 7, y, 20s);
      waited = std::chrono::steady_clock::now() - t0;
    });
    while (!started)
      std::this_thread::yield();
    const auto spin = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(rng() % 60); // into the recv
    while (std::chrono::steady_clock::now() < spin) {
    }
    p.a->abort("race " + std::to_string(g));
    waiter.join();
    slow += waited > 2s;
    not_aborted += st.code != transport_errc::aborted;
  }
  CHECK(slow == 0);
  CHECK(not_aborted == 0);
}

TEST_CASE("a group whose generation ends while a rank never came gives up at once, not "
          "at the 30 s timeout - through the registry, as a worker ends a generation",
          "[transport]") {
  // Two of three ranks join; the third died before it wrote its address.
  transport_registry registry(transport_kind::gloo, 3);
  std::string e1, e2;
  std::shared_ptr<tensor_transport> t1, t2;
  const auto start = std::chrono::steady_clock::now();
  std::thread a([&] { t1 = registry.connect(1, 7, e1); });
  std::thread b([&] { t2 = registry.connect(2, 7, e2); });
  std::this_thread::sleep_for(300ms);
  registry.abort(7, "node 0 lost");
  a.join();
  b.join();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  INFO("joins gave up after " << took.count() << " ms: '" << e1 << "' / '" << e2 << "'");
  CHECK_FALSE(t1);
  CHECK_FALSE(t2);
  CHECK(e1.find("generation 7 ended: node 0 lost") != std::string::npos);
  CHECK(took < 3s); // one 200 ms slice after the abort, on a loaded machine
  // The next generation forms as usual, on the same store, with all three.
  std::shared_ptr<tensor_transport> n[3];
  std::string en[3];
  std::thread r1([&] { n[1] = registry.connect(1, 8, en[1]); });
  std::thread r2([&] { n[2] = registry.connect(2, 8, en[2]); });
  n[0] = registry.connect(0, 8, en[0]);
  r1.join();
  r2.join();
  INFO(en[0] << " / " << en[1] << " / " << en[2]);
  CHECK(n[0]);
  CHECK(n[1]);
  CHECK(n[2]);
}
