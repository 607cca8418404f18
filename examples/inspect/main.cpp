// bamboo-inspect: attaches to a running manager as an observer (it proves the
// cluster token like a worker and never counts as a node) and shows the run:
// which node runs which stage and shadow, the members' states, every actor's
// state, current work and mailbox, the latest events and losses. On a
// terminal, a full-screen view refreshed every --period-ms with a prompt for
// commands (preempt, notice, drain, checkpoint, redundancy, pause, resume);
// --json prints one snapshot, or a command's answer; --watch prints each new
// event as a JSON line until the run ends.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <iostream>
#include <regex>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/errors.hpp"
#include "actors/net/network.hpp"
#include "actors/net/observer.hpp"
#include "examples/cluster/process.hpp"
#include "examples/inspect/console.hpp"
#include "examples/inspect/snapshot_json.hpp"

using namespace bamboo;

namespace {

constexpr const char* program = "bamboo-inspect";

// The error's words without its code's name, which tells a user nothing.
std::string words(const caf::error& err) {
  auto why = describe(err);
  const auto colon = why.find(": ");
  return colon == std::string::npos ? why : why.substr(colon + 2);
}

// "refused: wrong cluster token" (exit 2), "error: the manager is gone" (1).
int failed(const caf::error& err) {
  const bool bad_input = is_error(err, errc::invalid_config);
  std::cerr << program << ": " << (bad_input ? "" : "error: ") << words(err) << "\n";
  return bad_input ? 2 : 1;
}

// How many events at the front of `now` were in `before` (the board keeps the
// latest ones, in order: old ones drop off the front, new ones join the back).
std::size_t seen_already(const std::vector<schema::cluster_event>& before,
                         const std::vector<schema::cluster_event>& now) {
  auto same = [](const schema::cluster_event& a, const schema::cluster_event& b) {
    return a.time_ms == b.time_ms && a.text == b.text;
  };
  for (std::size_t k = std::min(before.size(), now.size()); k > 0; --k)
    if (std::equal(before.end() - static_cast<std::ptrdiff_t>(k), before.end(),
                   now.begin(), same))
      return k;
  return 0;
}

// --watch: each event not printed yet, as a JSON line, until the run ends.
int watch(observer& o, schema::cluster_snapshot s, std::chrono::milliseconds period,
          std::chrono::milliseconds timeout) {
  std::vector<schema::cluster_event> printed;
  for (;;) {
    for (std::size_t i = seen_already(printed, s.events); i < s.events.size(); ++i)
      std::printf("%s\n", app::to_json(s.events[i]).c_str());
    std::fflush(stdout);
    printed = std::move(s.events);
    std::this_thread::sleep_for(period);
    auto next = o.snapshot(timeout);
    if (!next) {
      std::cerr << program << ": the watch ends: " << words(next.error()) << "\n";
      return 0;
    }
    s = std::move(*next);
  }
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"bamboo-inspect: watch a running bamboo cluster"};
  std::string address, token_file, operator_token_file;
  bool json = false, follow = false;
  int period_ms = 100;
  double timeout_s = 10;
  std::vector<std::string> words;
  app.add_option("address", address, "the manager's HOST:PORT")->required();
  app.add_option("command", words,
                 "with --json: a command to run (preempt NODE, notice NODE [SECONDS], "
                 "help), its answer printed as JSON");
  app.add_option("--token-file", token_file, "cluster token file (else $BAMBOO_TOKEN)");
  app.add_option("--operator-token-file", operator_token_file,
                 "the operator token, which commands need (else $BAMBOO_OPERATOR_TOKEN; "
                 "without it: watch only)");
  tls_files tls;
  app.add_option("--tls-cert", tls.cert, "TLS: this observer's certificate (PEM)");
  app.add_option("--tls-key", tls.key, "TLS: its private key (PEM)");
  app.add_option("--tls-ca", tls.ca, "TLS: the CA that signed the manager's certificate");
  app.add_flag("--json", json, "print one snapshot of the run as JSON and exit");
  app.add_flag("--watch", follow, "print each event as a JSON line until the run ends");
  app.add_option("--period-ms", period_ms,
                 "how often the view and --watch ask the manager")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "how long the manager may take to answer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  if (auto status = process::parse_or_exit(app, argc, argv, program))
    return *status;
  static const std::regex addr_re(R"((.+):(\d{1,5}))");
  std::smatch m;
  if (!std::regex_match(address, m, addr_re) || std::stoi(m[2]) > 65535) {
    std::cerr << program << ": error: '" << address << "' is not HOST:PORT\n";
    return 2;
  }
  if (!json && !follow && !isatty(STDOUT_FILENO)) {
    std::cerr << program
              << ": error: standard output is not a terminal: pass --json or "
                 "--watch\n";
    return 2;
  }
  if (!words.empty() && !json) {
    std::cerr << program
              << ": error: a command after the address needs --json (at the "
                 "view's prompt, type it)\n";
    return 2;
  }
  if (auto problem = check_tls(tls)) {
    std::cerr << program << ": error: " << *problem << "\n";
    return 2;
  }
  auto token = process::token_or_complain(program, token_file);
  if (!token)
    return 2;
  auto op = process::operator_token_or_complain(program, operator_token_file);
  if (!op)
    return 2;
  const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  caf::actor_system_config cfg;
  configure_network(cfg, tls);
  caf::actor_system sys{cfg};
  // CAF's connect has no deadline of its own.
  auto connecting = std::async(std::launch::async, [&] {
    return connect_to_manager(
        sys, m[1].str(), static_cast<std::uint16_t>(std::stoi(m[2])), *token, timeout);
  });
  if (connecting.wait_for(timeout + std::chrono::seconds(2)) !=
      std::future_status::ready) {
    std::cerr << program << ": error: no answer from " << address << " within "
              << timeout_s << " s\n";
    std::fflush(stderr);
    _exit(1); // the connect cannot be cancelled
  }
  auto gateway = connecting.get();
  if (!gateway) {
    std::cerr << program << ": error: cannot reach the manager at " << address << ": "
              << describe(gateway.error()) << "\n";
    return is_error(gateway.error(), errc::invalid_config) ? 2 : 1;
  }
  observer o{sys, *gateway};
  auto first = o.attach(*token, timeout, *op);
  if (!first)
    return failed(first.error());
  if (json && !words.empty()) {
    auto a = o.command(words, timeout);
    if (!a)
      return failed(a.error());
    std::printf("{\"ok\":%s,\"answer\":%s}\n", a->ok ? "true" : "false",
                app::json_string(a->text).c_str());
    return a->ok ? 0 : 2;
  }
  if (json) {
    std::printf("%s\n", app::to_json(*first).c_str());
    return 0;
  }
  if (!follow)
    return app::run_console(o, address, std::chrono::milliseconds(period_ms), timeout);
  return watch(o, std::move(*first), std::chrono::milliseconds(period_ms), timeout);
}
