// The actor-system set-up of a process that talks to others: CAF's network
// layer (the middleman) on top of bamboo's own registrations (actors/system.hpp),
// and the control frames; with TLS files, CAF's OpenSSL module, so that the
// manager's port speaks only TLS with certificates both sides verify.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

namespace bamboo {

// PEM files: this process's certificate and key, and the CA that signed the
// other side's. All three, or none (no TLS).
struct tls_files {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// One line naming what is missing or unreadable; nullopt when usable.
std::optional<std::string> check_tls(const tls_files& tls);

void configure_network(caf::actor_system_config& cfg, const tls_files& tls = {});

// The manager's gateway at bind:port: with TLS when the system was configured
// so (certificates keep strangers out), else behind the front door, where a
// peer proves `token` before CAF's protocol (actors/net/front_door.hpp).
caf::expected<std::uint16_t> publish_gateway(caf::actor_system& sys,
                                             const caf::actor& gateway,
                                             std::uint16_t port, const std::string& bind,
                                             const std::string& token);
// A worker's (or bamboo-inspect's) connection to the manager's gateway: over
// TLS, or through the door with the token's proof; every step with a deadline.
caf::expected<caf::actor>
connect_to_manager(caf::actor_system& sys, const std::string& host, std::uint16_t port,
                   const std::string& token,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

} // namespace bamboo
