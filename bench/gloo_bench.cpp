// Gloo transport throughput for a 16 MiB tensor next to a bare c10d
// ProcessGroupGloo send/recv of the same tensor (what our wrapper costs) and to
// a plain TCP socket moving the same bytes (what loopback can do), and the
// re-homing state copy (an AdamW state of the same 16 MiB packed, sent, loaded
// and digested on both sides, as a new shadow across processes gets it), measured in
// one run (two ranks in one process over 127.0.0.1, interleaved rounds, the
// first 3 left out as warm-up, medians with min and max); then the
// multi-process failover latency against the step time (real processes).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "actors/plan/run_record.hpp"
#include "bench/bench_util.hpp"
#include "bench/process_failover.hpp"
#include "model/optimizer.hpp"
#include "transport/gloo_transport.hpp"

namespace bamboo::bench::gloo_bench {
namespace {

using clock_type = std::chrono::steady_clock;

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

// A connected pair of loopback TCP sockets.
std::pair<int, int> tcp_pair() {
  int srv = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(srv, 1);
  getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len);
  int cli = socket(AF_INET, SOCK_STREAM, 0);
  connect(cli, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int acc = accept(srv, nullptr, nullptr);
  close(srv);
  int one = 1;
  setsockopt(cli, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return {cli, acc};
}

bool write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    auto w = write(fd, p, n);
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, char* p, std::size_t n) {
  while (n > 0) {
    auto r = read(fd, p, n);
    if (r <= 0)
      return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

} // namespace

int bench_main(int, char**) {
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
  std::vector<double> ours, bare, raw, copy;
  // Parameters plus both moments: 16 MiB of flat state, as one stage's.
  optimizer_config oc;
  adamw src({{"w", at::rand({floats / 3})}}, oc, 10);
  adamw dst({{"w", at::zeros({floats / 3})}}, oc, 10);
  auto state_buf = at::empty({src.flat_state_size()});
  bool copies_agree = true;
  auto run_copy = [&](int r) {
    auto t0 = clock_type::now();
    std::uint64_t loaded = 0;
    std::thread rx([&] {
      b->recv(0, 1000 + r, state_buf, std::chrono::seconds(30));
      dst.load_flat_state(state_buf, 3);
      auto back = dst.flat_state();
      loaded = fnv1a_words(back.data_ptr(), static_cast<std::size_t>(back.numel()) * 4);
    });
    auto flat = src.flat_state().contiguous();
    const auto sent =
        fnv1a_words(flat.data_ptr(), static_cast<std::size_t>(flat.numel()) * 4);
    a->send(1, 1000 + r, flat);
    rx.join();
    a->flush(std::chrono::seconds(30));
    copies_agree = copies_agree && sent == loaded;
    copy.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  };
  auto [tx, rx_fd] = tcp_pair();
  auto run_raw = [&, tx = tx, rx_fd = rx_fd] {
    auto t0 = clock_type::now();
    const std::size_t n = floats * 4;
    std::thread rx3([&] { read_all(rx_fd, static_cast<char*>(y.data_ptr()), n); });
    write_all(tx, static_cast<const char*>(x.data_ptr()), n);
    rx3.join();
    raw.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
  };
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
  for (int r = 0; r < rounds; ++r) { // rotating which goes first: no order bias
    run_copy(r);
    if (r % 3 == 0) {
      run_ours(r);
      run_bare(r);
      run_raw();
    } else if (r % 3 == 1) {
      run_bare(r);
      run_raw();
      run_ours(r);
    } else {
      run_raw();
      run_ours(r);
      run_bare(r);
    }
  }
  close(tx);
  close(rx_fd);
  for (auto* v : {&ours, &bare, &raw, &copy}) // warm-up: connections, page faults
    v->erase(v->begin(), v->begin() + 3);
  const double mib = floats * 4 / 1048576.0;
  const double o = median(ours), c = median(bare), w = median(raw);
  std::printf("16 MiB send/recv over loopback:\n");
  std::printf("  bamboo gloo_transport %s (%.0f MiB/s)\n", bench::spread(ours).c_str(),
              mib / o);
  std::printf("  bare c10d Gloo        %s (%.0f MiB/s)\n", bench::spread(bare).c_str(),
              mib / c);
  std::printf("  plain TCP socket      %s (%.0f MiB/s)\n", bench::spread(raw).c_str(),
              mib / w);
  std::printf(
      "throughput ratio bamboo / bare c10d:  %.3f  (goal >= 0.9: the wrapper's cost)\n",
      c / o);
  std::printf(
      "throughput ratio bamboo / plain TCP:  %.3f  (what Gloo gets of loopback)\n",
      w / o);
  const double cp = median(copy);
  const double copy_mib = src.flat_state_size() * 4 / 1048576.0;
  std::printf("re-homing state copy (%.1f MiB: pack, send, load, digest both sides) %s "
              "(%.0f MiB/s)%s\n",
              copy_mib, bench::spread(copy).c_str(), copy_mib / cp,
              copies_agree ? "" : "  DIGESTS DIFFER");
  std::printf("throughput ratio state copy / bare c10d send:  %.3f\n",
              (copy_mib / cp) / (mib / c));
  std::fflush(stdout);
  if (!copies_agree)
    return 1;
  return bench::process_failover(BAMBOO_TRAIN_BIN, 5) ? 0 : 1;
}

} // namespace bamboo::bench::gloo_bench
