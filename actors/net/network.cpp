#include "actors/net/network.hpp"

#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/openssl/remote_actor.hpp>

#include "actors/net/door_client.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/front_door.hpp"
#include "actors/system.hpp"

namespace bamboo {

std::optional<std::string> check_tls(const tls_files& tls) {
  if (!tls.enabled())
    return std::nullopt;
  for (const auto& [option, file] :
       {std::pair<const char*, const std::string&>{"--tls-cert", tls.cert},
        {"--tls-key", tls.key},
        {"--tls-ca", tls.ca}}) {
    if (file.empty())
      return std::string(option) + " is missing: TLS needs --tls-cert, --tls-key and "
                                   "--tls-ca";
    if (::access(file.c_str(), R_OK) != 0)
      return std::string(option) + " " + file + ": cannot be read";
  }
  return std::nullopt;
}

void configure_network(caf::actor_system_config& cfg, const tls_files& tls) {
  cfg.load<caf::io::middleman>();
  if (tls.enabled()) {
    cfg.load<caf::openssl::manager>();
    cfg.openssl_certificate = tls.cert;
    cfg.openssl_key = tls.key;
    cfg.openssl_cafile = tls.ca;
  }
  configure(cfg);
  register_frames(cfg);
}

namespace {
bool tls_on(caf::actor_system& sys) {
  return sys.has_openssl_manager();
}
} // namespace

caf::expected<std::uint16_t> publish_gateway(caf::actor_system& sys,
                                             const caf::actor& gateway,
                                             std::uint16_t port, const std::string& bind,
                                             const std::string& token) {
  if (tls_on(sys)) // certificates keep strangers out before any BASP
    return caf::openssl::publish(gateway, port, bind.c_str());
  auto door = front_door::open(sys, gateway, port, bind, token);
  if (!door)
    return std::move(door.error());
  const auto bound = (*door)->port();
  // The door serves as long as the actor it stands before.
  gateway->attach_functor([door = *door] { door->close(); });
  return bound;
}

caf::expected<caf::actor> connect_to_manager(caf::actor_system& sys,
                                             const std::string& host, std::uint16_t port,
                                             const std::string& token,
                                             std::chrono::milliseconds timeout) {
  if (tls_on(sys))
    return caf::openssl::remote_actor(sys, host, port);
  return connect_through_door(sys, host, port, token, timeout);
}

} // namespace bamboo
