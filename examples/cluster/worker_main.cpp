// bamboo-worker: joins a bamboo-manager by host:port, proving the cluster token
// by challenge-response, then heartbeats. A worker declared lost (e.g. it was
// stopped) is fenced and joins again as a new node. SIGTERM is a preemption
// notice: it tells the manager its deadline and leaves.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/auth.hpp"
#include "actors/errors.hpp"
#include "actors/frame_channel.hpp"
#include "actors/messages.hpp"
#include "examples/cluster/process.hpp"
#include "transport/log.hpp"

using namespace bamboo;

namespace {

constexpr auto join_timeout = std::chrono::seconds(10);

std::optional<schema::frame> await_frame(caf::scoped_actor& self) {
  std::optional<schema::frame> out;
  self->receive(
      [&](const wire_frame& w) {
        auto d = schema::decode(w.bytes);
        if (d)
          out = std::move(d.value);
      },
      caf::after(join_timeout) >> [] {});
  return out;
}

// One join: challenge, proof, answer. Returns the node id, or -1 with `why`.
int join(caf::scoped_actor& self, const caf::actor& manager, const std::string& token,
         const std::string& zone, std::string& why) {
  self->send(manager, to_wire(schema::challenge_request{}));
  auto c = await_frame(self);
  if (!c || !std::holds_alternative<schema::join_challenge>(*c)) {
    why = "no challenge from the manager";
    return -1;
  }
  const auto& nonce = std::get<schema::join_challenge>(*c).nonce;
  schema::join_request req;
  req.zone = zone;
  req.version = "0.1.0";
  req.proof = prove_token(token, nonce);
  self->send(manager, to_wire(req));
  auto a = await_frame(self);
  if (!a) {
    why = "no answer to the join request";
    return -1;
  }
  if (auto* r = std::get_if<schema::join_refused>(&*a)) {
    why = r->reason;
    return -1;
  }
  if (auto* ok = std::get_if<schema::join_accept>(&*a))
    return static_cast<int>(ok->node);
  why = "unexpected answer to the join request";
  return -1;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"bamboo-worker: a node of a bamboo cluster"};
  std::string manager_addr, token_file, zone = "default", log_level = "info";
  int heartbeat_ms = 200, deadline_ms = 30000;
  app.add_option("--manager", manager_addr, "the manager's host:port")->required();
  app.add_option("--token-file", token_file, "cluster token file (else $BAMBOO_TOKEN)");
  app.add_option("--zone", zone, "failure domain of this node");
  app.add_option("--heartbeat-ms", heartbeat_ms, "heartbeat period")
      ->check(CLI::PositiveNumber);
  app.add_option("--preemption-deadline-ms", deadline_ms,
                 "time between a SIGTERM and the end of the node");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  if (auto status = process::parse_or_exit(app, argc, argv, "bamboo-worker"))
    return *status;
  log::set_level(log_level);
  static const std::regex addr_re(R"((.+):(\d{1,5}))");
  std::smatch m;
  if (!std::regex_match(manager_addr, m, addr_re) || std::stoi(m[2]) > 65535) {
    std::cerr << "bamboo-worker: error: --manager '" << manager_addr
              << "' is not host:port\n";
    return 2;
  }
  auto token = process::token_or_complain("bamboo-worker", token_file);
  if (!token)
    return 2;
  process::install_stop_handlers();

  caf::actor_system_config cfg;
  process::configure(cfg);
  caf::actor_system sys{cfg};
  auto logger = log::get("bamboo.worker");
  auto manager = sys.middleman().remote_actor(
      m[1].str(), static_cast<std::uint16_t>(std::stoi(m[2])));
  if (!manager) {
    std::cerr << "bamboo-worker: error: cannot reach the manager at " << manager_addr
              << ": " << sys.render(manager.error()) << "\n";
    return 1;
  }
  caf::scoped_actor self{sys};
  std::string error;
  int node = join(self, *manager, *token, zone, error);
  if (node < 0) {
    std::cerr << "bamboo-worker: refused: " << error << "\n";
    return 2;
  }
  std::printf("bamboo-worker: joined as node %d\n", node);
  std::fflush(stdout);

  // Heartbeats from this thread's actor until a signal ends the loop.
  const auto period = std::chrono::milliseconds(heartbeat_ms);
  while (process::stop_signal() == 0) {
    self->send(*manager,
               to_wire(schema::heartbeat{static_cast<std::uint32_t>(node), 0, 0, 0}));
    bool fenced = false;
    self->receive(
        [&](const wire_frame& w) {
          auto d = schema::decode(w.bytes);
          if (d && std::holds_alternative<schema::join_refused>(d.value)) {
            logger->warn("node {}: {}", node,
                         std::get<schema::join_refused>(d.value).reason);
            fenced = true;
          }
        },
        caf::after(period) >> [] {});
    if (fenced) {
      node = join(self, *manager, *token, zone, error);
      if (node < 0) {
        std::cerr << "bamboo-worker: refused: " << error << "\n";
        return 2;
      }
      std::printf("bamboo-worker: joined again as node %d\n", node);
      std::fflush(stdout);
    }
  }
  if (process::stop_signal() == SIGTERM) {
    self->send(*manager, to_wire(schema::preemption_notice{
                             static_cast<std::uint32_t>(node), deadline_ms}));
    logger->info("node {}: preemption notice, leaving", node);
  }
  return 0;
}
