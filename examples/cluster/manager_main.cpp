// bamboo-manager (and `TRAINER manager`): the cluster's front door for worker processes.
// Listens on 127.0.0.1 (unless told otherwise) through CAF's middleman, admits workers
// that prove the cluster token, and watches them. With --stages it trains: once that many
// workers joined, each runs one stage (and the replica of the next), and losses are
// failed over to shadows as in embedded mode. It hosts the tensor transport's rendezvous
// store. Without --stages it only admits and watches.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/net/cluster_runner.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/network.hpp"
#include "examples/cluster/process.hpp"
#include "examples/cluster/status.hpp"
#include "examples/programs/main.hpp"
#include "examples/train/cli.hpp"
#include "examples/train/report.hpp"
#include "log/log.hpp"
#include "model/checkpoint_manifest.hpp"

namespace bamboo {

namespace {

// Admission only: join, heartbeats, fencing, until a stop signal.
int admit_only(const cluster_options& c) {
  process::install_stop_handlers();
  caf::actor_system_config cfg;
  configure_network(cfg, c.tls);
  caf::actor_system sys{cfg};
  gateway_spec spec;
  spec.token = c.token;
  spec.operator_token = c.operator_token;
  spec.frame_limit = c.frame_limit;
  spec.store_port = 0; // the store is served over the control channel
  spec.heartbeats = c.heartbeats;
  auto gateway = spawn_gateway(sys, spec);
  auto bound = publish_gateway(sys, gateway, c.port, c.bind, c.token);
  if (!bound) {
    std::cerr << "bamboo-manager: error: cannot listen on " << c.bind << ":" << c.port
              << ": " << sys.render(bound.error()) << "\n";
    caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
    return 2;
  }
  std::printf("bamboo-manager: listening on %s:%u\n", c.bind.c_str(), *bound);
  std::fflush(stdout);
  status::emit("listening " + std::to_string(*bound));
  while (process::stop_signal() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  log::get("bamboo.manager")->info("stopping on signal {}", process::stop_signal());
  caf::anon_send_exit(gateway, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace

int manager_main(int argc, char** argv, std::shared_ptr<const model_definition> model) {
  CLI::App app{"bamboo-manager: admits and watches bamboo workers, and trains with "
               "them (--stages)"};
  app::cli_options o;
  o.cfg.custom_model = std::move(model);
  app::train_options train(app, o);
  cluster_options c;
  int port = 0, join_timeout_s = 120;
  std::string token_file, operator_token_file;
  app.add_option("--port", port, "port to listen on (0: pick one)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--bind", c.bind, "address to listen on")->capture_default_str();
  app.add_option("--token-file", token_file, "cluster token file (else $BAMBOO_TOKEN)");
  app.add_option("--operator-token-file", operator_token_file,
                 "the operator token that bamboo-inspect's commands need (else "
                 "$BAMBOO_OPERATOR_TOKEN; neither: observers only watch)");
  app.add_option("--tls-cert", c.tls.cert, "TLS: this manager's certificate (PEM)");
  app.add_option("--tls-key", c.tls.key, "TLS: its private key (PEM)");
  app.add_option("--tls-ca", c.tls.ca,
                 "TLS: the CA that signed the workers' certificates");
  app.add_option("--frame-limit", c.frame_limit, "largest control frame accepted, bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--join-timeout-s", join_timeout_s,
                 "how long to wait for the workers to join")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  // bamboo-train --processes says which kills it will do (not in --help: it
  // is the launcher's, and kills nothing).
  std::vector<std::string> announced;
  app.add_option("--announced-kill", announced, "node=N@step=K")->group("");
  // The launcher's token was made for this run only: it keys no checkpoint.
  bool unkeyed = false;
  app.add_flag("--unkeyed-checkpoints", unkeyed, "checkpoints without a keyed digest")
      ->group("");
  if (auto status = process::parse_or_exit(app, argc, argv, "bamboo-manager"))
    return *status;
  if (auto problem = train.finish()) {
    std::cerr << "bamboo-manager: error: " << *problem << "\n";
    return 2;
  }
  if (o.nodes > 0) {
    std::cerr << "bamboo-manager: error: --nodes is for embedded mode; workers are "
                 "counted by --workers\n";
    return 2;
  }
  if (auto problem = check_tls(c.tls)) {
    std::cerr << "bamboo-manager: error: " << *problem << "\n";
    return 2;
  }
  if (app.count("--transport") > 0 && o.run.transport == transport_kind::local) {
    std::cerr << "bamboo-manager: error: --transport local hands tensors over inside one "
                 "process; workers use gloo\n";
    return 2;
  }
  if (o.print_schedule) {
    std::cerr << "bamboo-manager: error: --print-schedule is bamboo-train's (it prints "
                 "and exits)\n";
    return 2;
  }
  if (!o.run.preemptions.empty() || o.run.preempt_rate > 0) {
    std::cerr << "bamboo-manager: error: --preempt injects kills in embedded mode; "
                 "preempt worker processes with signals\n";
    return 2;
  }
  for (const auto& a : announced) {
    double no_rate = 0;
    if (auto problem = parse_preempt(a, c.announced_kills, no_rate);
        problem || no_rate > 0) {
      std::cerr << "bamboo-manager: error: --announced-kill '" << a
                << "': " << (problem ? *problem : "node=N@step=K, not a rate") << "\n";
      return 2;
    }
  }
  log::set_level(o.log_level);
  auto token = process::token_or_complain("bamboo-manager", token_file);
  if (!token)
    return 2;
  c.port = static_cast<std::uint16_t>(port);
  c.token = *token;
  if (!unkeyed) // a token the user gave keys the checkpoints' manifests
    key_checkpoints(*token);
  auto op = process::operator_token_or_complain("bamboo-manager", operator_token_file);
  if (!op)
    return 2;
  c.operator_token = *op;
  c.heartbeats = o.run.heartbeats;
  c.collect_digests = o.run.collect_digests;
  c.checkpoints = o.run.checkpoints;
  c.replacement_wait =
      std::chrono::milliseconds(static_cast<long>(o.replacement_wait_s * 1000));
  c.join_timeout = std::chrono::seconds(join_timeout_s);
  c.workers = o.workers;
  c.depths = o.run.depths;
  c.auto_pipelines = o.auto_pipelines;
  if (app.count("--stages") == 0)
    return admit_only(c);

  app::run_report report(o);
  if (!report.open("bamboo-manager"))
    return 2;
  c.on_listening = [&](std::uint16_t p) {
    std::printf("bamboo-manager: listening on %s:%u, waiting for %d workers\n",
                c.bind.c_str(), p, o.workers > 0 ? o.workers : o.cfg.coordinates());
    std::fflush(stdout);
    status::emit("listening " + std::to_string(p));
  };
  c.on_started = [] { status::emit("started"); };
  c.on_rollback = [&](std::int64_t to_step, const std::string& why) {
    report.on_rollback(to_step, why);
    status::emit("rollback " + std::to_string(to_step));
  };
  c.on_replan = [&](std::int64_t step, const std::string& why) {
    report.on_replan(step, why);
  };
  c.on_step = [&](const step_record& r) {
    report.on_step(r);
    status::emit("committed " + std::to_string(r.step));
  };
  // SIGTERM or SIGINT: the step in flight finishes, the boundary is
  // checkpointed, the workers are let go; a second one ends the process at once.
  process::install_graceful_stop();
  c.stop_signal = [] { return process::stop_signal(); };
  auto result = run_cluster(o.cfg, c);
  if (!result)
    return app::failure_status("bamboo-manager", result.error());
  report.summary(*result);
  if (result->stopped_by != 0)
    return app::stopped_status("bamboo-manager", *result, c.checkpoints.dir);
  return report.write_digests("bamboo-manager", *result) && report.written() ? 0 : 1;
}

} // namespace bamboo
