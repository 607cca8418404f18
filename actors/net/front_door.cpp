#include "actors/net/front_door.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/multiplexer.hpp>

#include "actors/errors.hpp"
#include "actors/net/door_proof.hpp"
#include "actors/net/refusal_log.hpp"
#include "log/log.hpp"

namespace bamboo {

namespace peer_book {
namespace {
std::mutex mutex;
std::set<caf::node_id> admitted_nodes;
std::map<caf::node_id, std::string> addresses;
} // namespace

void admit(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  admitted_nodes.insert(node);
}
void forget(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  admitted_nodes.erase(node);
}
bool admitted(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  return admitted_nodes.count(node) > 0;
}
std::optional<std::string> address(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = addresses.find(node);
  if (it == addresses.end())
    return std::nullopt;
  return it->second;
}
void remember(const caf::node_id& node, const std::string& where) {
  std::lock_guard<std::mutex> lock(mutex);
  addresses[node] = where;
}
void drop(const caf::node_id& node) {
  std::lock_guard<std::mutex> lock(mutex);
  addresses.erase(node);
}
} // namespace peer_book

namespace {

using clock_type = std::chrono::steady_clock;
// What waits to be written either way before a side is read no more: CAF's
// own buffers take the rest, as for any slow peer.
constexpr std::size_t pending_cap = 8u << 20;
constexpr std::size_t chunk = 64u << 10;
constexpr int poll_ms = 250;
// What an honest peer on a loaded machine takes to prove after its greeting:
// younger connections are drawn to make room only when no older one is left.
constexpr std::chrono::milliseconds honest_proof_time{250};

// One peer's connection: its TCP socket, and, once the peer has proven the
// token, our end of the socket pair whose other end CAF reads as the peer.
struct connection {
  int tcp = -1, caf = -1;
  std::string address, host;
  std::vector<std::uint8_t> door_nonce;
  door_hello_reader hello;
  bool proven = false;
  std::string node; // the CAF node id it proved
  basp_filter filter;
  std::vector<std::uint8_t> in; // the message being read, header first
  bool have_header = false;
  std::vector<std::uint8_t> to_caf, to_peer;
  bool peer_done = false, caf_done = false, dead = false;
  bool was_admitted = false, named = false;
  std::size_t drops = 0;
  clock_type::time_point since; // accepted, proven, or last fenced

  connection(caf::actor_system& sys, basp_limits limits) : filter(sys, limits) {}
  std::size_t need() const {
    return basp_header_bytes + (have_header ? filter.payload_size() : 0);
  }
  bool admitted() const {
    return static_cast<bool>(filter.node()) && peer_book::admitted(filter.node());
  }
};

void close_fd(int& fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

// The address and port, and the address alone (limits are per address).
std::pair<std::string, std::string> peer_address(const sockaddr_storage& sa) {
  char host[INET6_ADDRSTRLEN] = {0};
  std::uint16_t port = 0;
  if (sa.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (sa.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return {std::string(host) + ":" + std::to_string(port), host};
}

// Writes what it can of `buf` to fd; false on a broken socket.
bool flush(int fd, std::vector<std::uint8_t>& buf) {
  while (!buf.empty()) {
    auto n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (n < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    buf.erase(buf.begin(), buf.begin() + n);
  }
  return true;
}

} // namespace

struct front_door::impl {
  caf::actor_system& sys;
  caf::actor published, basp;
  std::string token;
  front_door_limits limits;
  std::shared_ptr<spdlog::logger> logger = log::get("bamboo.door");
  refusal_log refusals{logger, "connection"};
  int listener = -1;
  int wake[2] = {-1, -1};
  std::uint16_t port = 0;
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::list<connection> conns;
  mutable std::mutex stats_mutex;
  front_door_stats counts;
  std::mt19937_64 draw{std::random_device{}()};

  impl(caf::actor_system& s, caf::actor p, std::string t, front_door_limits l)
      : sys(s), published(std::move(p)), token(std::move(t)), limits(l) {}

  ~impl() {
    stop();
    close_fd(listener);
    close_fd(wake[0]);
    close_fd(wake[1]);
  }

  void stop() {
    if (!thread.joinable())
      return;
    stopping = true;
    char b = 0;
    [[maybe_unused]] auto n = ::write(wake[1], &b, 1);
    thread.join();
    for (auto& c : conns)
      end(c);
    conns.clear();
    refusals.summarise(clock_type::now(), true);
    const auto st = stats();
    logger->info("the door closes: {} connection(s) proved the cluster token, {} "
                 "refused; {} bytes passed to CAF, {} of them from connections that had "
                 "not proven the token",
                 st.proven, st.refused, st.bytes_to_caf, st.unproven_bytes_to_caf);
  }

  front_door_stats stats() const {
    std::lock_guard<std::mutex> lock(stats_mutex);
    return counts;
  }

  void end(connection& c) {
    close_fd(c.tcp);
    close_fd(c.caf);
    if (c.named)
      peer_book::drop(c.filter.node());
    c.dead = true;
  }

  void refuse(connection& c, const std::string& why) {
    refusals.note(c.host, c.address, why, clock_type::now());
    {
      std::lock_guard<std::mutex> lock(stats_mutex);
      ++counts.refused;
    }
    end(c);
  }

  std::size_t unproven_from(const std::string& host, std::size_t& all) const {
    std::size_t mine = 0;
    all = 0;
    for (const auto& c : conns)
      if (!c.dead && !c.proven) {
        ++all;
        mine += c.host == host;
      }
    return mine;
  }

  // Takes every connection waiting (a flood is drained, not left to fill the
  // backlog before an honest peer). Over the limits a new connection is
  // closed at once: none already here goes to make room.
  void accept_all() {
    for (int k = 0; k < 256; ++k) {
      sockaddr_storage sa{};
      socklen_t len = sizeof sa;
      int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&sa), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0)
        return;
      auto [address, host] = peer_address(sa);
      std::size_t all = 0;
      const auto mine = unproven_from(host, all);
      std::string why;
      if (mine >= limits.unproven_per_address)
        why = "over " + std::to_string(limits.unproven_per_address) +
              " connections from one address that have not proven the token";
      else if (all >= limits.unproven && !make_room())
        why = "over " + std::to_string(limits.unproven) +
              " connections that have not proven the token";
      if (!why.empty()) {
        ::close(fd);
        refusals.note(host, address, why, clock_type::now());
        std::lock_guard<std::mutex> lock(stats_mutex);
        ++counts.refused;
        continue;
      }
      auto& c = conns.emplace_back(sys, limits.frames);
      c.tcp = fd;
      c.address = std::move(address);
      c.host = std::move(host);
      c.since = clock_type::now();
      c.door_nonce = make_nonce();
      c.to_peer = door_greeting(c.door_nonce);
      flush(c.tcp, c.to_peer); // at once: the peer's time to prove starts now
    }
  }

  // Full of unproven connections (a flood from many addresses): one of them,
  // drawn at random, goes. An honest peer proves within milliseconds, so a
  // flood must outpace its proof to push it out, and one whose proof is
  // already waiting to be read is never drawn; a connection that has proven
  // the token is never one of them. False when none may go.
  bool make_room() {
    // Those greeted long enough ago to have proven, if honest, go first.
    const auto now = clock_type::now();
    std::vector<connection*> idle, old;
    for (auto& c : conns) {
      int unread = 0;
      if (c.dead || c.proven || ::ioctl(c.tcp, FIONREAD, &unread) != 0 || unread != 0)
        continue;
      idle.push_back(&c);
      if (now - c.since >= honest_proof_time)
        old.push_back(&c);
    }
    if (!old.empty())
      idle.swap(old);
    if (idle.empty())
      return false;
    auto& victim =
        *idle[std::uniform_int_distribution<std::size_t>(0, idle.size() - 1)(draw)];
    refuse(victim, "drawn to make room: over " + std::to_string(limits.unproven) +
                       " connections that have not proven the token");
    return true;
  }

  // The peer proved the token as `node`: the door answers, and CAF serves the
  // connection from here on as if it had accepted it (the handler CAF's broker
  // keeps for a connection without a doorman): the server's handshake, then
  // BASP.
  void admit_to_caf(connection& c, const door_hello& h) {
    if (!canonical_node_id(h.node))
      return refuse(c, "a proof for a node id not as CAF writes one");
    if (h.node == caf::to_string(sys.node()))
      return refuse(c, "a proof as the manager's own node");
    std::size_t waiting = 0;
    for (const auto& o : conns) {
      if (o.dead || !o.proven)
        continue;
      if (o.node == h.node)
        return refuse(c, "node " + h.node + " is connected already (from " + o.address +
                             "): one connection per node");
      waiting += !o.admitted();
    }
    if (waiting >= limits.unadmitted)
      return refuse(c, "over " + std::to_string(limits.unadmitted) +
                           " connections that have proven the token and not joined");
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
      return refuse(c, std::string("no socket pair: ") + std::strerror(errno));
    c.proven = true;
    c.node = h.node;
    c.since = clock_type::now();
    c.caf = pair[0];
    const auto answer = door_answer(token, c.door_nonce, h);
    c.to_peer.insert(c.to_peer.end(), answer.begin(), answer.end());
    {
      std::lock_guard<std::mutex> lock(stats_mutex);
      ++counts.proven;
    }
    auto scribe = sys.middleman().backend().new_scribe(pair[1]);
    caf::anon_send(basp, caf::publish_atom::value, std::move(scribe), port,
                   caf::actor_cast<caf::strong_actor_ptr>(published),
                   std::set<std::string>{});
  }

  // Reads the peer's proof, never past its end; false when there was nothing
  // (more) to read.
  bool read_proof(connection& c) {
    std::uint8_t buf[door_hello_head + door_max_node_id + door_proof_bytes];
    auto n = ::recv(c.tcp, buf, std::min(sizeof buf, c.hello.wanted()), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      refuse(c, "the connection ended before a proof of the cluster token");
      return false;
    }
    if (n < 0)
      return false;
    if (!c.hello.feed(buf, static_cast<std::size_t>(n)))
      return refuse(c, c.hello.why()), false;
    if (!c.hello.complete())
      return true;
    const auto h = c.hello.hello();
    if (!check_door_hello(token, c.door_nonce, h))
      return refuse(c, "a wrong proof of the cluster token"), false;
    admit_to_caf(c, h);
    return !c.dead;
  }

  // Reads the peer's bytes up to the end of the message under way (never
  // more than its header allows); false when there was nothing to read.
  bool read_peer(connection& c) {
    if (!c.proven)
      return read_proof(c);
    const bool admitted = c.admitted();
    std::uint8_t buf[chunk];
    const auto want = std::min(chunk, c.need() - c.in.size());
    auto n = ::recv(c.tcp, buf, want, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.peer_done = true;
      return false;
    }
    if (n < 0)
      return false;
    c.in.insert(c.in.end(), buf, buf + n);
    if (c.in.size() < c.need())
      return true;
    if (!c.have_header) {
      if (!c.filter.header(c.in.data(), admitted))
        return refuse(c, c.filter.refused()), false;
      c.have_header = true;
      if (c.in.size() < c.need())
        return true;
    }
    const auto v = c.filter.payload(c.in.data() + basp_header_bytes,
                                    c.in.size() - basp_header_bytes, admitted);
    if (v == basp_filter::verdict::close)
      return refuse(c, c.filter.refused()), false;
    if (!c.named && c.filter.node()) {
      // The handshake is held to the node id the peer proved.
      if (const auto said = caf::to_string(c.filter.node()); said != c.node)
        return refuse(c,
                      "a handshake as node " + said + " after a proof as node " + c.node),
               false;
      peer_book::remember(c.filter.node(), c.address);
      c.named = true;
    }
    if (v == basp_filter::verdict::pass) {
      c.to_caf.insert(c.to_caf.end(), c.in.begin(), c.in.end());
    } else if (!c.filter.dropped().empty() &&
               c.drops++ == 0) // once per connection: a flood logs one line
      logger->warn("dropped {} from {} (and any more it sends)", c.filter.dropped(),
                   c.address);
    c.in.clear();
    c.have_header = false;
    return true;
  }

  void read_caf(connection& c) {
    std::uint8_t buf[chunk];
    auto n = ::recv(c.caf, buf, chunk, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.caf_done = true;
      return;
    }
    if (n > 0)
      c.to_peer.insert(c.to_peer.end(), buf, buf + n);
  }

  void check_deadline(connection& c, clock_type::time_point now) {
    if (!c.proven) {
      if (now - c.since > limits.prove_within)
        refuse(c, "no proof of the cluster token within " +
                      std::to_string(limits.prove_within.count()) + " ms");
      return;
    }
    const bool admitted = c.admitted();
    if (c.was_admitted && !admitted) // fenced: it may join again, in time
      c.since = now;
    c.was_admitted = admitted;
    if (!admitted && now - c.since > limits.join_within)
      refuse(c, "no join within " + std::to_string(limits.join_within.count()) + " ms");
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<connection*> owners;
    while (!stopping) {
      fds.clear();
      owners.clear();
      fds.push_back({wake[0], POLLIN, 0});
      fds.push_back({listener, POLLIN, 0});
      for (auto& c : conns) {
        short tcp_ev = 0, caf_ev = 0;
        if (!c.peer_done && c.to_caf.size() < pending_cap)
          tcp_ev |= POLLIN;
        if (!c.to_peer.empty())
          tcp_ev |= POLLOUT;
        if (c.caf >= 0 && !c.caf_done && c.to_peer.size() < pending_cap)
          caf_ev |= POLLIN;
        if (!c.to_caf.empty())
          caf_ev |= POLLOUT;
        fds.push_back({c.tcp, tcp_ev, 0});
        fds.push_back({c.caf, caf_ev, 0}); // -1 before the proof: poll skips it
        owners.push_back(&c);
      }
      if (::poll(fds.data(), fds.size(), poll_ms) < 0 && errno != EINTR)
        break;
      if (fds[1].revents & POLLIN)
        accept_all();
      for (std::size_t i = 0; i < owners.size(); ++i) {
        auto& c = *owners[i];
        const auto tcp = fds[2 + 2 * i].revents, caf = fds[3 + 2 * i].revents;
        if (c.dead)
          continue;
        if (tcp & (POLLIN | POLLHUP | POLLERR))
          for (int k = 0; k < 256 && c.to_caf.size() < pending_cap && read_peer(c); ++k) {
          }
        if (c.dead)
          continue;
        if (caf & (POLLIN | POLLHUP | POLLERR))
          read_caf(c);
        if (!flush(c.tcp, c.to_peer))
          c.peer_done = c.caf_done = true, c.to_caf.clear(), c.to_peer.clear();
        if (const auto before = c.to_caf.size(); before > 0) {
          // Counted where bytes reach CAF's socket, whichever path queued them.
          const bool ok = c.caf >= 0 && flush(c.caf, c.to_caf);
          std::lock_guard<std::mutex> lock(stats_mutex);
          const auto sent = before - c.to_caf.size();
          counts.bytes_to_caf += sent;
          if (!c.proven)
            counts.unproven_bytes_to_caf += sent;
          if (!ok && c.caf >= 0)
            c.peer_done = c.caf_done = true, c.to_caf.clear(), c.to_peer.clear();
        }
        // Either side gone: what the other still has to say is delivered.
        if ((c.peer_done && c.to_caf.empty()) ||
            (c.caf_done && c.to_peer.empty() && c.caf >= 0))
          end(c);
      }
      const auto now = clock_type::now();
      for (auto& c : conns)
        if (!c.dead)
          check_deadline(c, now);
      refusals.summarise(now);
      conns.remove_if([](const connection& c) { return c.dead; });
    }
  }
};

caf::expected<std::shared_ptr<front_door>>
front_door::open(caf::actor_system& sys, const caf::actor& published, std::uint16_t port,
                 const std::string& bind, const std::string& token,
                 front_door_limits limits) {
  if (token.empty())
    return make_error(errc::invalid_config, "the manager's port needs a cluster token");
  auto p = std::make_unique<impl>(sys, published, token, limits);
  // Each unproven connection holds a descriptor: room for the door's limits
  // above the members' own, where the hard limit allows.
  if (rlimit r{}; ::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < 4096 &&
                  r.rlim_cur < r.rlim_max) {
    r.rlim_cur = std::min<rlim_t>(4096, r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(bind.empty() ? nullptr : bind.c_str(), service.c_str(),
                             &hints, &res);
      rc != 0)
    return make_error(errc::invalid_config,
                      "--bind " + bind + ": " + std::string(::gai_strerror(rc)));
  std::string why = "no address";
  for (auto* a = res; a && p->listener < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 4096) == 0)
      p->listener = fd;
    else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  if (p->listener < 0)
    return make_error(errc::invalid_config,
                      "cannot listen on " + bind + ":" + service + ": " + why);
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  ::getsockname(p->listener, reinterpret_cast<sockaddr*>(&sa), &len);
  p->port = sa.ss_family == AF_INET6
                ? ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port)
                : ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
  if (::pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0)
    return make_error(errc::invalid_config, "cannot make a pipe");
  p->basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  auto* raw = p.get();
  p->thread = std::thread([raw] { raw->run(); });
  return std::shared_ptr<front_door>(new front_door(std::move(p)));
}

front_door::front_door(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
front_door::~front_door() = default;
std::uint16_t front_door::port() const {
  return impl_->port;
}
front_door_stats front_door::stats() const {
  return impl_->stats();
}
void front_door::close() {
  impl_->stop();
}

} // namespace bamboo
