// A training cluster of real processes against peers that reach the manager's
// port: control input comes only from members, and only the messages a peer
// may send are taken from it. Training must go on as if nobody had called:
// the losses and the final state equal the embedded fault-free run's.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "actors/net/auth.hpp"
#include "actors/net/frame_channel.hpp"
#include "actors/net/frame_session.hpp"
#include "actors/net/gateway.hpp"
#include "actors/net/network.hpp"
#include "actors/protocol.hpp"
#include "tests/run_command.hpp"

using namespace bamboo;
using namespace bamboo::test;

namespace {

// Another process's view of the manager: an actor system of its own, connected
// to the manager's port on 127.0.0.1 through the door with the token (it need
// not have joined).
struct peer_process {
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::expected<caf::actor> gateway;
  caf::scoped_actor self;
  explicit peer_process(const std::string& port)
      : sys((configure_network(cfg), cfg)),
        gateway(connect_to_manager(
            sys, "127.0.0.1", static_cast<std::uint16_t>(std::stoi(port)), test_token)),
        self(sys) {
    REQUIRE(gateway);
  }
};

} // namespace

TEST_CASE("a peer that did not join sends leave, a negative-clip commit, attaches and "
          "ticks to a training cluster, and training goes on with the same losses",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(53);
  const auto expected = embedded_reference(cfg);
  process_run run(cfg, "hostile");
  const auto port = run.proc.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  run.wait_steps(2);

  peer_process peer(port);
  auto& gateway = peer.gateway;
  auto& self = peer.self;
  for (int i = 0; i < 50; ++i) {
    // What the manager's own actors send the gateway.
    self->send(*gateway, broadcast_atom::value, to_wire(schema::leave{"go away"}));
    caf::anon_send(*gateway, broadcast_atom::value,
                   to_wire(schema::generation_end{1, "a fake end"}));
    self->send(*gateway, attach_atom::value, i % cfg.stages);
    self->send(*gateway, tick_atom::value);
    // What only the manager sends workers, and what only members send.
    for (std::uint64_t k = 0; k < 16; ++k) {
      self->send(*gateway, to_wire(schema::commit{1, k, -1.0}, schema::target::stage));
      self->send(*gateway, to_wire(schema::leave{"go away"}, schema::target::stage));
    }
    self->send(*gateway, to_wire(schema::heartbeat{
                             static_cast<std::uint32_t>(i % 4), 0, 0, 0, {}}));
    self->send(*gateway, to_wire(schema::preemption_notice{1, 10}));
  }
  run.finish();
  const auto log = run.proc.log();
  CHECK(log.find("0 preemption(s) survived") != std::string::npos);
  // The atoms stop at the front door, named by the address they come from.
  CHECK(std::regex_search(
      log, std::regex(R"(dropped a message that is not a control frame \(@<>\+@atom\+)"
                      R"(.*\) from 127\.0\.0\.1:\d+)")));
  auto m = read_metrics(run.metrics);
  check_losses(m, expected);
  check_state(run.digests, expected);
}

TEST_CASE("an embedded run with --transport gloo has no store port and no wildcard "
          "listener: its groups meet in an in-process store, Gloo's pairs on 127.0.0.1",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(58);
  cfg.steps = 400;
  scratch_dir dir;
  auto args = process_run::args(cfg, dir.file("m.csv"), dir.file("d.csv"),
                                {"--transport", "gloo"});
  args.erase(args.begin() + 1); // --processes
  child run(dir, "embedded_gloo", args, test_token);
  REQUIRE_FALSE(run.wait_for(R"(step 5 \()", 60s).empty());
  const auto ss = run_command("ss -ltnpH");
  REQUIRE(ss.status == 0);
  INFO(ss.output);
  std::istringstream lines(ss.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("pid=" + std::to_string(run.pid()) + ",") == std::string::npos)
      continue;
    // Gloo's pairs listen on 127.0.0.1 only until they are connected.
    std::istringstream fields(line);
    std::string state, recv_q, send_q, local;
    fields >> state >> recv_q >> send_q >> local;
    INFO(line);
    CHECK(local.rfind("127.0.0.1:", 0) == 0);
  }
  run.signal(SIGKILL);
  run.wait_exit(10s);
}

TEST_CASE(
    "during a run across processes (the manager on its default --bind 127.0.0.1) no "
    "socket of the manager or the workers listens on a wildcard address, and the "
    "rendezvous store has no port",
    "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(57);
  cfg.steps = 40;
  process_run run(cfg, "listening");
  run.wait_steps(3);
  const auto children = run_command("pgrep -P " + std::to_string(run.proc.pid()));
  REQUIRE(children.status == 0);
  std::vector<std::string> pids;
  std::istringstream in(children.output);
  for (std::string pid; in >> pid;)
    pids.push_back(pid);
  REQUIRE(pids.size() == 5); // the manager and four workers
  const auto ss = run_command("ss -ltnpH");
  REQUIRE(ss.status == 0);
  int ours = 0;
  std::istringstream lines(ss.output);
  for (std::string line; std::getline(lines, line);) {
    bool mine = false;
    for (const auto& pid : pids)
      mine = mine || line.find("pid=" + pid + ",") != std::string::npos;
    if (!mine)
      continue;
    ++ours;
    INFO(line);
    // State, Recv-Q, Send-Q, the local address:port, the peer's, the process.
    std::istringstream fields(line);
    std::string state, recv_q, send_q, local;
    fields >> state >> recv_q >> send_q >> local;
    CHECK(local.rfind("127.0.0.1:", 0) == 0);
  }
  INFO(ss.output);
  // The manager's port (Gloo's pairs listen only until they are connected).
  CHECK(ours >= 1);
  run.finish();
  CHECK(run.proc.log().find("(store ") == std::string::npos);
}

TEST_CASE(
    "a hostile member that joined with the token joins twice, reports for stages it "
    "does not hold, heartbeats as another node and sends 100,000 ticks, is refused, "
    "logged, and the run completes with the same losses",
    "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(59);
  cfg.steps = 30;
  const auto expected = embedded_reference(cfg);
  scratch_dir dir;
  const auto& token = test_token;
  auto margs = process_run::manager_args(
      cfg, dir.file("metrics.csv"), dir.file("digests.csv"),
      {"--workers", "5", "--heartbeat-ms", "100", "--heartbeat-misses", "20"});
  child manager(dir, "manager", margs, token);
  const auto port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  std::vector<std::unique_ptr<child>> workers;
  for (int w = 0; w < 4; ++w) {
    workers.push_back(std::make_unique<child>(
        dir, "w" + std::to_string(w),
        std::vector<std::string>{BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port},
        token));
    REQUIRE(workers.back()->wait_for(R"(joined as node (\d+))", 20s) ==
            std::to_string(w));
  }

  // The fifth member: a proper join, then everything a member must not do.
  peer_process peer(port);
  auto& sys = peer.sys;
  auto& gateway = peer.gateway;
  auto& self = peer.self;
  auto next = [&](std::chrono::milliseconds timeout) {
    std::optional<schema::frame> out;
    self->receive(
        [&](const wire_frame& w) {
          if (auto d = schema::decode(w.bytes))
            out = d.value;
        },
        caf::after(timeout) >> [] {});
    return out;
  };
  auto next_not_heartbeat = [&] {
    for (int i = 0; i < 50; ++i)
      if (auto f = next(100ms); f && !std::holds_alternative<schema::heartbeat>(*f))
        return f;
    return std::optional<schema::frame>{};
  };
  handshake h{
      make_nonce(), {}, caf::to_string(sys.node()), caf::to_string(gateway->node())};
  self->send(*gateway, to_wire(schema::challenge_request{0xffffffffu, h.worker_nonce,
                                                         h.worker_id}));
  auto challenge = next_not_heartbeat();
  REQUIRE(challenge);
  h.manager_nonce = std::get<schema::join_challenge>(*challenge).nonce;
  self->send(*gateway,
             to_wire(schema::join_request{0, "z", "0.1.0",
                                          prove(token, proof_role::worker, h), "", ""}));
  // A member's frames carry the session's MAC from here on.
  session_book::open(sys.node(), gateway->node(), session_key(token, h));
  auto accept = next_not_heartbeat();
  REQUIRE(accept);
  REQUIRE(std::holds_alternative<schema::join_accept>(*accept));
  const auto me = std::get<schema::join_accept>(*accept).node;
  CHECK(me == 4);

  send_frame(&*self, *gateway,
             schema::challenge_request{0xffffffffu, make_nonce(), h.worker_id});
  auto again = next_not_heartbeat();
  REQUIRE(again);
  REQUIRE(std::holds_alternative<schema::join_refused>(*again));
  CHECK(std::get<schema::join_refused>(*again).reason == "already joined as node 4");
  for (std::uint32_t stage : {0u, 1u, 3u, 99u, 0xffffffffu})
    for (auto t : {schema::target::none, schema::target::stage, schema::target::shadow})
      send_frame(&*self, *gateway,
                 schema::step_report{me, stage, 1, 0, -1e30, 1e30, 9, 9, 0, 0, {}}, t);
  send_frame(&*self, *gateway, schema::heartbeat{0, 0, 0, 0, {}}); // node 0's number
  for (int i = 0; i < 100000; ++i) {
    self->send(*gateway, tick_atom::value);
    if (i % 1000 == 0) // a member that keeps its place
      send_frame(&*self, *gateway, schema::heartbeat{me, 0, 0, 0, {}});
  }
  // Heartbeats as itself until the run is over; the leave at the end is obeyed.
  bool let_go = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!let_go && std::chrono::steady_clock::now() < deadline) {
    send_frame(&*self, *gateway, schema::heartbeat{me, 0, 0, 0, {}});
    if (auto f = next(100ms); f && std::holds_alternative<schema::leave>(*f))
      let_go = true;
  }
  CHECK(let_go);
  const int status = manager.wait_exit(60s);
  const auto log = manager.log();
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  REQUIRE(status == 0);
  // Logged once per sender (whatever it sends next), and the member kept its place.
  CHECK(log.find("dropped a frame of a kind the gateway does not take") !=
        std::string::npos);
  CHECK(log.find("node 4 lost") == std::string::npos);
  // Its heartbeat with node 0's number was refused by name.
  CHECK(log.find("dropped a heartbeat for node 0 from node 4") != std::string::npos);
  for (auto& w : workers)
    CHECK(w->wait_exit(20s) == 0);
  check_losses(read_metrics(dir.file("metrics.csv")), expected);
  check_state(dir.file("digests.csv"), expected);
}

namespace {
long status_kib(pid_t pid, const char* field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0)
      return std::stol(line.substr(std::strlen(field)));
  return -1;
}
long number_after(const std::string& text, const std::string& before) {
  const auto at = text.find(before);
  return at == std::string::npos ? -1 : std::stol(text.substr(at + before.size()));
}
} // namespace

TEST_CASE("a stranger at the manager's port never reaches CAF - a token holder cannot "
          "take a member's node id or lie about who speaks - and a 30 s connect flood "
          "keeps no honest member out",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(61);
  cfg.steps = 1000; // outlasts the attacks; the run is cut short by finish()
  const auto expected = embedded_reference(cfg);
  process_run run(cfg, "stranger");
  const auto port = run.proc.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  const auto token_file = run.proc.wait_for(R"(--token-file (\S+) )", 20s);
  REQUIRE_FALSE(token_file.empty());
  const auto manager =
      std::stoi(run.proc.wait_for(R"(bamboo-manager \(pid (\d+)\))", 20s));
  const auto worker = run.pid_of(1);
  run.wait_steps(2);
  const auto before = status_kib(manager, "VmHWM:");
  const auto attack = run_command(
      "BAMBOO_TOKEN=$(cat " + token_file + ") " + BAMBOO_HOSTILE_BIN + " " + port + " " +
      std::to_string(worker) + " " + std::to_string(manager) + " 30");
  INFO(attack.output);
  CHECK(attack.status == 0);
  CHECK(attack.output.find("admitted as node 4") != std::string::npos);
  CHECK(attack.output.find(": sent") == std::string::npos); // every attack refused
  CHECK(attack.output.find("a second join from another actor of a joined process: "
                           "refused: already joined as node 4") != std::string::npos);
  const auto open = number_after(attack.output, "held unfinished hellos: ");
  CHECK(open >= 0);
  CHECK(open <= 8); // the door keeps 8 unproven connections per address
  const auto peak = number_after(attack.output, "peak RSS while held: ");
  INFO("manager peak RSS " << before << " KiB before, " << peak << " KiB while held");
  CHECK(peak > 0);
  CHECK(peak - before < 64 * 1024);
  const auto join_ms = number_after(attack.output, "from 127.0.0.2: admitted in ");
  CHECK(join_ms >= 0);
  CHECK(join_ms < 5000);
  // 200 addresses holding 8 unproven connections each: the door is full, and
  // an honest connection still gets through.
  const auto many = run_command(
      "BAMBOO_TOKEN=$(cat " + token_file + ") " + BAMBOO_HOSTILE_BIN + " " + port + " " +
      std::to_string(worker) + " " + std::to_string(manager) + " 10 many-addresses");
  INFO(many.output);
  CHECK(many.status == 0);
  const auto through_ms = number_after(many.output, "through the door proven in ");
  CHECK(through_ms >= 0);
  CHECK(through_ms < 5000);
  run.finish();
  const auto log = run.proc.log();
  INFO(log.substr(0, 20000));
  CHECK(log.find("lost in step") == std::string::npos);
  CHECK(log.find("node_lost") == std::string::npos);
  // Each refusal is logged with the peer's address, repeats summarised.
  for (const char* refused :
       {"no proof of the cluster token", "a wrong proof of the cluster token",
        "is connected already", "a handshake as node", "a routed message",
        "a monitor or down message about another", "more than 16 sender ids",
        "a payload of 1073741824 bytes announced before a join",
        "connections from one address that have not proven the token",
        "drawn to make room"})
    CHECK(std::regex_search(
        log, std::regex(R"(closed (the connection from 127\.0\.0\.\d+:\d+|\d+ more )"
                        R"(connections from [^:]*in the last \d+ s): .*)" +
                        std::string(refused))));
  // Repeats summarised, a line per reason whatever the number of addresses.
  CHECK(std::regex_search(
      log,
      std::regex(R"(closed \d+ more connections from (127\.0\.0\.2|\d+ addresses))")));
  CHECK(log.find("0 of them from connections that had not proven the token") !=
        std::string::npos);
  // The log stays short: every line but the steps' own, under 1,000.
  const std::regex step_line(R"(step \d+ \(\d+/\d+\))");
  std::istringstream lines(log);
  int other = 0;
  for (std::string line; std::getline(lines, line);)
    other += !std::regex_search(line, step_line);
  CHECK(other < 1000);
  auto m = read_metrics(run.metrics);
  check_losses(m, expected);
}
