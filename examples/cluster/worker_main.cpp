// bamboo-worker (and `TRAINER worker`): joins a bamboo-manager by host:port, proving the
// cluster token by challenge-response, then serves as one node: its agent heartbeats,
// takes the node's assignment and runs its stage and replica. A worker declared lost
// (e.g. it was stopped) is fenced: with a stage it leaves, without one it joins
// again as a new node. SIGTERM is a preemption notice: the manager is told the
// deadline, hands the stage to its shadow at the next step boundary and lets
// the node go; the worker leaves by the deadline in any case.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <future>
#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/network.hpp"
#include "actors/net/worker_agent.hpp"
#include "actors/protocol.hpp"
#include "examples/cluster/process.hpp"
#include "examples/cluster/status.hpp"
#include "examples/programs/main.hpp"
#include "log/log.hpp"

namespace bamboo {

int worker_main(int argc, char** argv, std::shared_ptr<const model_definition> model) {
  CLI::App app{"bamboo-worker: a node of a bamboo cluster"};
  std::string manager_addr, token_file, zone = "default", log_level = "info", advertise;
  int heartbeat_ms = static_cast<int>(default_heartbeat_period.count());
  int deadline_ms = 30000;
  std::size_t frame_limit = schema::default_frame_limit;
  app.add_option("--manager", manager_addr, "the manager's host:port")->required();
  app.add_option("--token-file", token_file, "cluster token file (else $BAMBOO_TOKEN)");
  app.add_option("--zone", zone, "failure domain of this node");
  int connect_timeout_s = 10;
  app.add_option("--connect-timeout-s", connect_timeout_s,
                 "how long the manager may take to answer the connection")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  double join_timeout_s = 10, transport_timeout_s = 30;
  app.add_option("--join-timeout-s", join_timeout_s,
                 "how long the manager may take to answer a join")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--transport-timeout-s", transport_timeout_s,
                 "how long one tensor transfer may take (a lost peer's transfers end "
                 "with its generation, long before)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  tls_files tls;
  app.add_option("--tls-cert", tls.cert, "TLS: this worker's certificate (PEM)");
  app.add_option("--tls-key", tls.key, "TLS: its private key (PEM)");
  app.add_option("--tls-ca", tls.ca, "TLS: the CA that signed the manager's certificate");
  app.add_option("--advertise", advertise,
                 "the address peers reach this node's tensor transport at (default: the "
                 "address this host reaches the manager from)");
  app.add_option("--heartbeat-ms", heartbeat_ms,
                 "heartbeat period, when the manager does not set one")
      ->check(CLI::PositiveNumber);
  app.add_option("--preemption-deadline-ms", deadline_ms,
                 "time between a SIGTERM and the end of the node")
      ->capture_default_str();
  app.add_option("--frame-limit", frame_limit, "largest control frame accepted, bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
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
  if (auto problem = check_tls(tls)) {
    std::cerr << "bamboo-worker: error: " << *problem << "\n";
    return 2;
  }
  auto token = process::token_or_complain("bamboo-worker", token_file);
  if (!token)
    return 2;
  if (model) // a broken model is this program's mistake: say so before joining
    if (auto bad = check_model(*model, train_config{})) {
      std::cerr << "bamboo-worker: error: " << *bad << "\n";
      return 2;
    }
  process::install_stop_handlers();

  caf::actor_system_config cfg;
  configure_network(cfg, tls);
  caf::actor_system sys{cfg};
  auto logger = log::get("bamboo.worker");
  const std::string host = m[1].str();
  // CAF's connect has no deadline: a manager that speaks TLS to a worker that
  // does not (or the other way round) never completes the handshake.
  auto connecting = std::async(std::launch::async, [&] {
    // The door's own deadline comes first: it names what it met.
    return connect_to_manager(sys, host, static_cast<std::uint16_t>(std::stoi(m[2])),
                              *token, std::chrono::seconds(connect_timeout_s));
  });
  if (connecting.wait_for(std::chrono::seconds(connect_timeout_s + 2)) !=
      std::future_status::ready) {
    status::say("bamboo-worker: error: no answer from the manager at " + manager_addr +
                " within " + std::to_string(connect_timeout_s) +
                " s (a manager with TLS needs --tls-cert, --tls-key and --tls-ca here; "
                "one without, none)");
    std::fflush(stdout);
    _exit(1); // the connect cannot be cancelled, and the actor system would wait for it
  }
  auto manager = connecting.get();
  if (!manager) {
    std::cerr << "bamboo-worker: error: cannot reach the manager at " << manager_addr
              << ": " << describe(manager.error()) << "\n";
    return is_error(manager.error(), errc::invalid_config) ? 2 : 1;
  }
  caf::scoped_actor self{sys};
  worker_spec ws;
  ws.gateway = *manager;
  ws.token = *token;
  ws.zone = zone;
  ws.model = model;
  ws.store_host = host;
  if (advertise.empty()) {
    std::string why;
    auto local = process::local_address_towards(host, why);
    if (!local) {
      std::cerr << "bamboo-worker: error: no address of this host reaches the manager at "
                << host << " (" << why << "): pass --advertise\n";
      return 1;
    }
    advertise = *local;
  }
  ws.advertise = advertise;
  ws.join_timeout = std::chrono::milliseconds(static_cast<long>(join_timeout_s * 1000));
  ws.transport_timeout =
      std::chrono::milliseconds(static_cast<long>(transport_timeout_s * 1000));
  logger->info("tensor transport on {}", advertise);
  ws.frame_limit = frame_limit;
  ws.heartbeat_period = std::chrono::milliseconds(heartbeat_ms);
  ws.on_joined = [](int node, bool again) {
    const int pid = static_cast<int>(getpid());
    std::printf("bamboo-worker: joined %sas node %d (pid %d)\n", again ? "again " : "",
                node, pid);
    std::fflush(stdout);
    status::emit("joined " + std::to_string(node) + " " + std::to_string(pid));
  };
  // An operator's order through the manager (bamboo-inspect): the same signals
  // a spot instance's end brings, raised here.
  static std::atomic<long> ordered_deadline_ms{0};
  ws.on_order = [](const std::string& kind, double seconds) {
    if (kind == "preempt")
      raise(SIGKILL);
    else if (kind == "notice") {
      if (seconds > 0)
        ordered_deadline_ms = static_cast<long>(seconds * 1000);
      raise(SIGTERM);
    }
  };
  auto agent = spawn_worker_agent(sys, ws);
  self->monitor(agent);
  bool noticed = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  for (;;) {
    std::optional<caf::error> ended; // the agent's exit reason
    self->receive(
        [&](caf::down_msg& dm) {
          if (dm.source == agent.address())
            ended = dm.reason; // the agent also ends when the manager is lost
        },
        caf::after(std::chrono::milliseconds(20)) >> [] {});
    if (ended) {
      if (!*ended)
        return 0; // let go by the manager
      const auto why = describe(*ended);
      if (why.find(manager_silent_words) != std::string::npos)
        status::emit("orphaned " + std::to_string(::getpid()));
      const bool refused =
          ended->category() == error_category &&
          ended->code() == static_cast<std::uint8_t>(errc::invalid_config);
      // A refused join says "refused..."; a configuration this worker cannot
      // take (a data file that only the manager's host has) is an error of
      // usage too: exit 2, with the reason.
      const auto at = why.find("refused");
      const auto colon = why.find(": ");
      status::say("bamboo-worker: " + (refused && at != std::string::npos ? why.substr(at)
                                       : refused && colon != std::string::npos
                                           ? "error: " + why.substr(colon + 2)
                                           : "error: " + why));
      return refused ? 2 : 1;
    }
    const int sig = process::stop_signal();
    if (sig == SIGTERM && !noticed) {
      noticed = true;
      if (ordered_deadline_ms > 0)
        deadline_ms = static_cast<int>(ordered_deadline_ms);
      deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
      self->send(agent, notice_atom::value, static_cast<std::int64_t>(deadline_ms));
    } else if (sig == SIGINT ||
               (noticed && std::chrono::steady_clock::now() >= deadline)) {
      logger->info("leaving on {}", sig == SIGINT ? "SIGINT" : "the preemption deadline");
      // The actor system ends only when its actors have: the agent goes first.
      self->send_exit(agent, caf::exit_reason::user_shutdown);
      self->wait_for(agent);
      return 0;
    }
  }
}

} // namespace bamboo
