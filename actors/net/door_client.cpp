#include "actors/net/door_client.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/network/multiplexer.hpp>

#include "actors/errors.hpp"
#include "actors/net/door_proof.hpp"

namespace bamboo {

namespace {

using clock_type = std::chrono::steady_clock;

struct socket_guard {
  int fd = -1;
  ~socket_guard() { reset(); }
  void reset() {
    if (fd >= 0)
      ::close(fd);
    fd = -1;
  }
  int release() { return std::exchange(fd, -1); }
};

int left_ms(clock_type::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, left_ms(deadline));
    if (rc > 0)
      return true;
    if (rc == 0 || errno != EINTR)
      return false;
  }
}

// A non-blocking connection to host:port within the deadline; "" or why not.
std::string dial(socket_guard& s, const std::string& host, std::uint16_t port,
                 clock_type::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const auto service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    return ::gai_strerror(rc);
  std::string why = "no address";
  for (auto* a = res; a && s.fd < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline)) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err == 0 ? ETIMEDOUT : err;
    } else if (rc != 0 && errno == EINPROGRESS)
      errno = ETIMEDOUT;
    if (rc == 0)
      s.fd = fd;
    else {
      why = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  return s.fd >= 0 ? std::string() : why;
}

// Reads exactly n bytes within the deadline; "" or why not.
std::string read_exactly(int fd, std::uint8_t* p, std::size_t n,
                         clock_type::time_point deadline) {
  while (n > 0) {
    if (!wait_for(fd, POLLIN, deadline))
      return "timeout";
    auto r = ::recv(fd, p, n, 0);
    if (r == 0)
      return "closed";
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        continue;
      return std::strerror(errno);
    }
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return "";
}

std::string write_all(int fd, const std::vector<std::uint8_t>& bytes,
                      clock_type::time_point deadline) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    if (!wait_for(fd, POLLOUT, deadline))
      return "timeout";
    auto r = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        continue;
      return std::strerror(errno);
    }
    done += static_cast<std::size_t>(r);
  }
  return "";
}

} // namespace

namespace {

// One try at the door: the proven socket in `s`, "" on success; else why, and
// whether another try may do better (a door full of a flood's connections
// closes some at once, or draws one of them to close).
struct attempt {
  std::string why;
  bool retry = false, refused_proof = false;
};

attempt prove_once(socket_guard& s, const caf::actor_system& sys, const std::string& host,
                   std::uint16_t port, const std::string& token,
                   std::chrono::milliseconds timeout, clock_type::time_point deadline) {
  if (auto why = dial(s, host, port, deadline); !why.empty())
    return {"cannot connect: " + why, false};
  std::uint8_t greeting[door_greeting_bytes];
  if (auto why = read_exactly(s.fd, greeting, sizeof greeting, deadline); !why.empty()) {
    if (why == "timeout")
      return {"no greeting within " + std::to_string(timeout.count()) +
                  " ms: not a bamboo manager's port, or one that speaks TLS (give "
                  "--tls-cert, --tls-key and --tls-ca)",
              false};
    return {"closed the connection before its greeting (" + why +
                "): too many connections waiting at the door, or not a bamboo manager",
            true};
  }
  auto door_nonce = read_door_greeting(greeting, sizeof greeting);
  if (!door_nonce)
    return {"its greeting is no bamboo door's (another program on that port, or a "
            "manager of another version)",
            false};
  const auto node = caf::to_string(sys.node());
  door_hello h{make_nonce(), node, {}};
  const auto hello = door_hello_bytes(token, *door_nonce, h.nonce, node);
  if (auto why = write_all(s.fd, hello, deadline); !why.empty())
    return {"cannot send the proof of the cluster token: " + why, true};
  std::vector<std::uint8_t> answer(door_proof_bytes);
  if (auto why = read_exactly(s.fd, answer.data(), answer.size(), deadline);
      !why.empty()) {
    if (why == "closed")
      return {"refused this process's proof of the cluster token (a wrong token, or "
              "this node id connected already)",
              true, true};
    return {"no answer to the proof of the cluster token (" + why + ")", false};
  }
  if (!check_door_answer(token, *door_nonce, h, answer))
    return {"it does not hold the cluster token (its answer fails the proof)", false};
  return {};
}

} // namespace

caf::expected<caf::actor>
connect_through_door(caf::actor_system& sys, const std::string& host, std::uint16_t port,
                     const std::string& token, std::chrono::milliseconds timeout) {
  const auto where = host + ":" + std::to_string(port);
  auto fail = [&](const std::string& why) {
    return make_error(errc::connection_refused, "the manager at " + where + ": " + why);
  };
  const auto deadline = clock_type::now() + timeout;
  socket_guard s;
  auto pause = std::chrono::milliseconds(50);
  int refused_proofs = 0;
  for (;;) {
    s.reset();
    const auto a = prove_once(s, sys, host, port, token, timeout, deadline);
    if (a.why.empty())
      break;
    refused_proofs += a.refused_proof;
    // A refused proof is tried three times (a flood may have drawn it), then
    // taken for a wrong token: the user's to fix, exit 2 where programs map
    // errors.
    if (a.refused_proof && refused_proofs >= 3)
      return make_error(errc::invalid_config, "the manager at " + where + " " + a.why);
    if (!a.retry || clock_type::now() + pause >= deadline)
      return fail(a.why);
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
  int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // CAF's broker takes the proven connection as one it opened: its client
  // handshake, then BASP.
  auto scribe = sys.middleman().backend().new_scribe(s.release());
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  caf::scoped_actor self{sys};
  caf::expected<caf::actor> out = fail("no answer from CAF's handshake");
  self->request(basp, std::chrono::milliseconds(std::max(1, left_ms(deadline))),
                caf::connect_atom::value, std::move(scribe), port)
      .receive(
          [&](caf::node_id& nid, caf::strong_actor_ptr& addr, std::set<std::string>&) {
            if (!nid || !addr)
              out = fail("CAF's handshake named no actor");
            else
              out = caf::actor_cast<caf::actor>(std::move(addr));
          },
          [&](caf::error& err) {
            out = fail("CAF's handshake failed: " + to_string(err));
          });
  return out;
}

} // namespace bamboo
