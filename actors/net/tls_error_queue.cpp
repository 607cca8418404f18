// CAF 0.17's OpenSSL module does not clear the thread's OpenSSL error queue
// before its SSL calls. One peer's failed handshake (a worker without TLS, or
// with a certificate of another CA) leaves errors there, and the next SSL call
// for another, healthy connection on the same multiplexer thread then reads
// as failed: the manager dropped every member. OpenSSL requires an empty queue
// before each I/O call; these wrappers, which the dynamic linker finds before
// libssl's own (libbamboo precedes libssl in every program's lookup order),
// clear it and call libssl's.
#include <dlfcn.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

template <class F>
F next_definition(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
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
  return real(ssl);
}

int SSL_connect(SSL* ssl) {
  static const auto real = next_definition<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

} // extern "C"
