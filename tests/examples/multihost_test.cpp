// Training across hosts, made real with Linux network namespaces: the manager
// and four workers each in a namespace of their own, joined by veth pairs to a
// bridge in a sixth one, with addresses this test assigns (10.213.0.0/24).
// Nothing touches the machine's own namespace, and all traffic stays inside.
// A worker killed with kill -9 and another cut off by `ip link set ... down`
// (a real partition) fail over; the losses equal the embedded fault-free run's.
// Needs root (CAP_SYS_ADMIN) and iproute2: skipped with a message otherwise.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include <signal.h>
#include <unistd.h>

#include "tests/run_command.hpp"

using namespace bamboo;
using namespace bamboo::test;

namespace {

// The namespaces, their links and addresses; all deleted at the end.
struct netns_lab {
  std::string prefix = "bbt" + std::to_string(getpid());
  std::vector<std::string> made;
  std::string error;

  std::string ns(const std::string& name) const { return prefix + name; }
  bool sh(const std::string& cmd) {
    auto r = run_command(cmd);
    if (r.status != 0 && error.empty())
      error = cmd + ": " + r.output;
    return r.status == 0;
  }
  bool add_ns(const std::string& name) {
    if (!sh("ip netns add " + ns(name)))
      return false;
    made.push_back(ns(name));
    return sh("ip -n " + ns(name) + " link set lo up");
  }
  // host `name` at 10.213.0.<octet>, its link "v<octet>" on the bridge's side.
  bool add_host(const std::string& name, int octet) {
    const std::string peer = "v" + std::to_string(octet);
    return add_ns(name) &&
           sh("ip link add eth0 netns " + ns(name) + " type veth peer name " + peer +
              " netns " + ns("br")) &&
           sh("ip -n " + ns(name) + " addr add 10.213.0." + std::to_string(octet) +
              "/24 dev eth0") &&
           sh("ip -n " + ns(name) + " link set eth0 up") &&
           sh("ip -n " + ns("br") + " link set " + peer + " master br0") &&
           sh("ip -n " + ns("br") + " link set " + peer + " up");
  }
  bool link(int octet, bool up) {
    return sh("ip -n " + ns("br") + " link set v" + std::to_string(octet) +
              (up ? " up" : " down"));
  }
  bool build() {
    return add_ns("br") && sh("ip -n " + ns("br") + " link add br0 type bridge") &&
           sh("ip -n " + ns("br") + " link set br0 up") && add_host("m", 1) &&
           add_host("w0", 10) && add_host("w1", 11) && add_host("w2", 12) &&
           add_host("w3", 13);
  }
  ~netns_lab() {
    for (const auto& n : made)
      run_command("ip netns del " + n);
  }
};

// Children are started with execve: the full path of `ip`.
std::string ip_command() {
  auto r = run_command("command -v ip");
  return r.status == 0 ? r.output.substr(0, r.output.find('\n')) : "ip";
}

std::vector<std::string> in_ns(const std::string& ns, std::vector<std::string> args) {
  static const std::string ip = ip_command();
  args.insert(args.begin(), {ip, "netns", "exec", ns});
  return args;
}

} // namespace

TEST_CASE("a manager and four workers in five network namespaces train GPT with S=4, "
          "survive a kill -9 and a link cut, fence the cut-off worker, and keep the "
          "fault-free losses",
          "[examples]") {
  if (geteuid() != 0) {
    WARN("skipped: network namespaces need root");
    return;
  }
  netns_lab lab;
  if (!lab.build()) {
    WARN("skipped: cannot make network namespaces here (" << lab.error << ")");
    return;
  }
  no_leftovers guard;
  auto cfg = small_gpt(61);
  cfg.steps = 24;
  const auto expected = embedded_reference(cfg);
  scratch_dir dir;
  const auto& token = test_token;
  auto margs =
      process_run::manager_args(cfg, dir.file("metrics.csv"), dir.file("digests.csv"),
                                {"--bind", "10.213.0.1", "--port", "0", "--heartbeat-ms",
                                 "100", "--heartbeat-misses", "5"});
  child manager(dir, "manager", in_ns(lab.ns("m"), margs), token);
  const auto port = manager.wait_for(R"(listening on 10\.213\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  std::vector<std::unique_ptr<child>> workers;
  for (int w = 0; w < 4; ++w) {
    workers.push_back(
        std::make_unique<child>(dir, "w" + std::to_string(w),
                                in_ns(lab.ns("w" + std::to_string(w)),
                                      {BAMBOO_WORKER_BIN, "--manager",
                                       "10.213.0.1:" + port, "--log-level", "info"}),
                                token));
    // One at a time: worker w is node w, on host 10.213.0.(10 + w).
    REQUIRE(workers.back()->wait_for(R"(joined as node (\d+))", 20s) ==
            std::to_string(w));
    CHECK_FALSE(
        workers.back()
            ->wait_for(R"(tensor transport on 10\.213\.0\.)" + std::to_string(10 + w), 5s)
            .empty());
  }
  REQUIRE_FALSE(manager.wait_for(R"(step 4 \()", 60s).empty());
  kill(workers[1]->pid(), SIGKILL);
  REQUIRE_FALSE(manager.wait_for(R"(node 1 lost: connection lost)", 10s).empty());
  REQUIRE_FALSE(manager.wait_for(R"(step 10 \()", 60s).empty());
  REQUIRE(lab.link(12, false)); // node 2 cut off mid-run
  REQUIRE_FALSE(manager.wait_for(R"(node 2 lost: missed heartbeats)", 10s).empty());
  REQUIRE(lab.link(12, true));
  // The cut-off worker, stale now, goes: fenced when its frames arrive, or on its
  // own when the manager's heartbeats stopped coming.
  CHECK(workers[2]->wait_exit(20s) != -1);
  INFO(workers[2]->log());
  CHECK((workers[2]->log().find("fenced") != std::string::npos ||
         workers[2]->log().find("no heartbeat from the manager") != std::string::npos));
  const int status = manager.wait_exit(120s);
  INFO(manager.log());
  REQUIRE(status == 0);
  for (int w : {0, 3})
    CHECK(workers[w]->wait_exit(20s) == 0);
  auto m = read_metrics(dir.file("metrics.csv"));
  check_losses(m, expected);
  check_state(dir.file("digests.csv"), expected);
}
