// bamboo-manager: the cluster's front door for worker processes. Listens on
// 127.0.0.1 (unless told otherwise) through CAF's middleman, admits workers that
// prove the cluster token, and watches them. It hosts the tensor transport's
// rendezvous store. (Driving training across processes is the next step.)
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/auth.hpp"
#include "actors/errors.hpp"
#include "actors/frame_channel.hpp"
#include "actors/gateway.hpp"
#include "actors/messages.hpp"
#include "examples/cluster/process.hpp"
#include "transport/gloo_transport.hpp"
#include "transport/log.hpp"

using namespace bamboo;

int main(int argc, char** argv) {
  CLI::App app{"bamboo-manager: admits and watches bamboo workers"};
  int port = 0;
  std::string bind = "127.0.0.1", token_file, log_level = "info";
  std::size_t frame_limit = schema::default_frame_limit;
  int heartbeat_ms = 200, misses = 5;
  app.add_option("--port", port, "port to listen on (0: pick one)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind, "address to listen on")->capture_default_str();
  app.add_option("--token-file", token_file, "cluster token file (else $BAMBOO_TOKEN)");
  app.add_option("--frame-limit", frame_limit, "largest control frame accepted, bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat period")
      ->check(CLI::PositiveNumber);
  app.add_option("--heartbeat-misses", misses, "missed heartbeats before a node is lost")
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  if (auto status = process::parse_or_exit(app, argc, argv, "bamboo-manager"))
    return *status;
  log::set_level(log_level);
  auto token = process::token_or_complain("bamboo-manager", token_file);
  if (!token)
    return 2;
  process::install_stop_handlers();

  caf::actor_system_config cfg;
  process::configure(cfg);
  caf::actor_system sys{cfg};
  gloo_store_server store(0, bind);
  gateway_spec spec;
  spec.token = *token;
  spec.frame_limit = frame_limit;
  spec.store_port = store.port();
  spec.heartbeat_period = std::chrono::milliseconds(heartbeat_ms);
  spec.heartbeat_misses = misses;
  auto gateway = spawn_gateway(sys, spec);
  auto bound =
      sys.middleman().publish(gateway, static_cast<std::uint16_t>(port), bind.c_str());
  if (!bound) {
    std::cerr << "bamboo-manager: error: cannot listen on " << bind << ":" << port << ": "
              << sys.render(bound.error()) << "\n";
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    return 2;
  }
  std::printf("bamboo-manager: listening on %s:%u (store %u)\n", bind.c_str(), *bound,
              store.port());
  std::fflush(stdout);
  while (process::stop_signal() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  log::get("bamboo.manager")->info("stopping on signal {}", process::stop_signal());
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  return 0;
}
