// CAF 0.17's OpenSSL module does not clear the thread's OpenSSL error queue
// before its SSL calls. One peer's failed handshake (a worker without TLS, or
// with a certificate of another CA) leaves errors there, and the next SSL call
// for another, healthy connection on the same multiplexer thread then reads
// as failed: the manager dropped every member. OpenSSL requires an empty queue
// before each I/O call; these wrappers, which the dynamic linker finds before
// libssl's own (libbamboo precedes libssl in every program's lookup order),
// clear it and call libssl's. SSL_accept's wrapper also logs a refused
// handshake (no certificate, another CA's, not TLS at all), once per peer
// address.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "log/log.hpp"

namespace {

std::string peer_host(int fd) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {0};
  if (sa.ss_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&sa)->sin_addr, host,
                sizeof host);
  else if (sa.ss_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&sa)->sin6_addr, host,
                sizeof host);
  return host;
}

template <class F>
F next_definition(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

// libssl's own, looked up as SSL_accept's is (libbamboo links only libcrypto).
template <class F>
F libssl(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

std::mutex mutex;
std::map<const SSL*, std::string> accepting; // the peer of each handshake under way
std::set<std::string> told;                  // addresses whose refusal was logged

// Before each try: whom the handshake is with, while the socket is connected.
void remember_peer(const SSL* ssl) {
  static const auto get_fd = libssl<int (*)(const SSL*)>("SSL_get_fd");
  std::lock_guard<std::mutex> lock(mutex);
  if (!get_fd || accepting.count(ssl))
    return;
  if (accepting.size() >= 4096) // handshakes CAF dropped without a last try
    accepting.clear();
  accepting.emplace(ssl, peer_host(get_fd(ssl)));
}

// After a try: a failed handshake (no certificate, another CA's, not TLS at
// all) is logged once per address, at most 1,024 addresses.
void after_accept(const SSL* ssl, int rc) {
  static const auto get_error = libssl<int (*)(const SSL*, int)>("SSL_get_error");
  const int why = rc == 1 || !get_error ? SSL_ERROR_NONE : get_error(ssl, rc);
  if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE)
    return; // under way
  std::string host;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = accepting.find(ssl);
    if (it != accepting.end()) {
      host = std::move(it->second);
      accepting.erase(it);
    }
    if (rc == 1 || host.empty() || told.size() >= 1024 || !told.insert(host).second)
      return;
  }
  char text[256] = "the peer closed the connection";
  if (auto e = ERR_peek_error(); e != 0)
    ERR_error_string_n(e, text, sizeof text);
  bamboo::log::get("bamboo.door")
      ->warn("refused a TLS handshake from {}: {} (further refusals from it are not "
             "logged)",
             host, text);
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto real = next_definition<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto real = next_definition<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static const auto real = next_definition<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  remember_peer(ssl);
  const int rc = real(ssl);
  after_accept(ssl, rc);
  return rc;
}

int SSL_connect(SSL* ssl) {
  static const auto real = next_definition<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

} // extern "C"
