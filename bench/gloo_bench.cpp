// Gloo transport throughput for a 16 MiB tensor next to a bare c10d
// ProcessGroupGloo send/recv of the same tensor, measured in one run (two ranks
// in one process over 127.0.0.1, interleaved rounds, medians); then the
// multi-process failover latency against the step time (real processes).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "bench/bench_util.hpp"
#include "bench/process_failover.hpp"
#include "transport/gloo_transport.hpp"

using namespace bamboo;
using bench::median;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int rounds = 51; // loopback is noisy: many interleaved rounds, medians
constexpr std::int64_t floats = 4 << 20; // 16 MiB

c10::intrusive_ptr<c10d::ProcessGroupGloo> bare_group(std::uint16_t port, int rank) {
  c10d::TCPStoreOptions so;
  so.port = port;
  auto tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto store = c10::make_intrusive<c10d::PrefixStore>("bare", tcp);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, 2, opts);
}

} // namespace

int main() {
  gloo_store_server server;
  std::unique_ptr<gloo_transport> a, b;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pa, pb;
  std::string ea, eb;
  std::thread t([&] {
    b = gloo_transport::join({"127.0.0.1", server.port(), 1, 2, 1}, eb);
    pb = bare_group(server.port(), 1);
  });
  a = gloo_transport::join({"127.0.0.1", server.port(), 0, 2, 1}, ea);
  pa = bare_group(server.port(), 0);
  t.join();
  if (!a || !b) {
    std::fprintf(stderr, "bench: %s %s\n", ea.c_str(), eb.c_str());
    return 1;
  }
  auto x = at::rand({floats});
  auto y = at::empty({floats});
  std::vector<double> ours, bare;
  auto run_ours = [&](int r) {
    auto t0 = clock_type::now();
    std::thread rx([&] { b->recv(0, r, y, std::chrono::seconds(30)); });
    a->send(1, r, x);
    rx.join();
    a->flush(std::chrono::seconds(30));
    ours.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  };
  auto run_bare = [&](int r) {
    auto t0 = clock_type::now();
    std::vector<at::Tensor> sv{x}, rv{y};
    std::thread rx2([&] { pb->recv(rv, 0, r)->wait(); });
    pa->send(sv, 1, r)->wait();
    rx2.join();
    bare.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  };
  for (int r = 0; r < rounds; ++r) { // alternating which goes first: no order bias
    if (r % 2 == 0) {
      run_ours(r);
      run_bare(r);
    } else {
      run_bare(r);
      run_ours(r);
    }
  }
  const double mib = floats * 4 / 1048576.0;
  const double o = median(ours), c = median(bare);
  std::printf(
      "16 MiB send/recv over loopback: bamboo gloo_transport %.2f ms (%.0f MiB/s), "
      "bare c10d %.2f ms (%.0f MiB/s)\n",
      1e3 * o, mib / o, 1e3 * c, mib / c);
  std::printf("throughput ratio bamboo / bare c10d: %.3f  (goal >= 0.9)\n", c / o);
  std::fflush(stdout);
  return bench::process_failover(BAMBOO_TRAIN_BIN, 5) ? 0 : 1;
}
