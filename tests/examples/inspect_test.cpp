// bamboo-inspect against a local cluster of processes: its --json snapshots
// match the run (the plan of each stage and shadow, generation, step) before
// and after a worker is killed, --watch streams the events, and bad input
// (a wrong token, nobody listening, no terminal) ends with one clear line.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include "tests/run_command.hpp"

#include <regex>

using namespace bamboo;
using namespace bamboo::test;

namespace {

std::string field(const std::string& json, const std::string& name) {
  std::smatch m;
  const std::regex re("\"" + name + "\":(\\[[^\\]]*\\]|\"[^\"]*\"|[-0-9.e]+)");
  return std::regex_search(json, m, re) ? m.str(1) : "";
}

outcome inspect(const std::string& port, const std::string& args,
                const std::string& token = test_token) {
  return run_command("BAMBOO_TOKEN=" + token + " " + BAMBOO_INSPECT_BIN + " " + args +
                     " 127.0.0.1:" + port);
}

// A manager training `cfg` and its 4 workers, started one at a time (worker w
// is node w), with the test token, until step 3 has committed.
struct cluster {
  scratch_dir dir;
  std::unique_ptr<child> manager;
  std::vector<std::unique_ptr<child>> workers;
  std::string port;
  explicit cluster(const train_config& cfg) {
    manager =
        std::make_unique<child>(dir, "manager",
                                process_run::manager_args(cfg, dir.file("metrics.csv"),
                                                          dir.file("digests.csv"), {}),
                                test_token);
    port = manager->wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
    REQUIRE_FALSE(port.empty());
    for (int w = 0; w < 4; ++w) {
      workers.push_back(std::make_unique<child>(
          dir, "w" + std::to_string(w),
          std::vector<std::string>{BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port},
          test_token));
      REQUIRE(workers.back()->wait_for(R"(joined as node (\d+))", 20s) ==
              std::to_string(w));
    }
    REQUIRE_FALSE(manager->wait_for(R"(step 3 \()", 30s).empty());
  }
};

// tmux on a server of its own, for the view's tests.
outcome tmux(const std::string& args) {
  return run_command("tmux -L bamboo-test-" + std::to_string(getpid()) + " " + args);
}

} // namespace

TEST_CASE("bamboo-inspect --json shows which node runs each stage and shadow\\, the "
          "generation and the step\\, before and after a worker is killed",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(71);
  cfg.steps = 400; // long enough for a loaded machine: stopped below
  cluster c(cfg);
  const auto& port = c.port;
  auto& manager = *c.manager;
  auto& workers = c.workers;
  auto before = inspect(port, "--json");
  INFO(before.output);
  REQUIRE(before.status == 0);
  CHECK(field(before.output, "model") == "\"gpt\"");
  CHECK(field(before.output, "generation") == "1");
  CHECK(std::stol(field(before.output, "step")) >= 2);
  CHECK(field(before.output, "stages") == "4");
  CHECK(field(before.output, "owners") == "[0,1,2,3]");
  CHECK(field(before.output, "shadows") == "[3,0,1,2]"); // node s-1 holds stage s's
  CHECK(before.output.find("\"node\":2,\"zone\":\"default\",\"state\":\"active\"") !=
        std::string::npos);

  REQUIRE(workers[2]->signal(SIGKILL));
  REQUIRE_FALSE(
      manager.wait_for("step (\\d+) completed after losing node 2", 30s).empty());
  const auto later = std::stol(field(before.output, "step")) + 6;
  REQUIRE_FALSE(manager.wait_for("step " + std::to_string(later) + " \\(", 30s).empty());
  auto after = inspect(port, "--json");
  INFO(after.output);
  REQUIRE(after.status == 0);
  CHECK(std::stoul(field(after.output, "generation")) >= 2);
  const auto owners = field(after.output, "owners");
  CHECK(owners == "[0,1,1,3]"); // stage 2 on its shadow's node, 1
  CHECK(after.output.find("\"node\":2,\"zone\":\"default\",\"state\":\"lost\"") !=
        std::string::npos);
  CHECK(after.output.find("\"node\":1,\"zone\":\"default\",\"state\":\"degraded\"") !=
        std::string::npos);
  CHECK(after.output.find("node 2 lost in step") != std::string::npos);
  CHECK(std::stol(field(after.output, "step")) > std::stol(field(before.output, "step")));
  manager.signal(SIGINT);
  manager.wait_exit(30s);
}

TEST_CASE("bamboo-inspect refuses a wrong token\\, says when nobody listens\\, and needs "
          "--json or --watch when its output is not a terminal",
          "[examples]") {
  no_leftovers guard;
  scratch_dir dir;
  child manager(dir, "manager", {BAMBOO_MANAGER_BIN, "--port", "0"}, test_token);
  const auto port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  auto wrong = inspect(port, "--json", "another-cluster-token-0123456789");
  CHECK(wrong.status == 2);
  // The observer checks the manager's proof first: a wrong token fails it.
  CHECK(wrong.output.find("bamboo-inspect: refused the manager: the manager could not "
                          "prove the cluster token") != std::string::npos);
  auto ok = inspect(port, "--json"); // admission only: no run, no members
  CHECK(ok.status == 0);
  CHECK(field(ok.output, "step") == "-1");
  auto plain = inspect(port, "");
  CHECK(plain.status == 2);
  CHECK(plain.output.find("standard output is not a terminal: pass --json or --watch") !=
        std::string::npos);
  manager.signal(SIGINT);
  CHECK(manager.wait_exit(20s) == 0);
  auto nobody = inspect(port, "--json --timeout-s 5");
  CHECK(nobody.status == 1);
  CHECK(nobody.output.find("cannot reach the manager at 127.0.0.1:" + port) !=
        std::string::npos);
  auto bad = run_command(std::string(BAMBOO_INSPECT_BIN) + " --json nowhere");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("'nowhere' is not HOST:PORT") != std::string::npos);
}

TEST_CASE(
    "the full-screen view in tmux shows the cluster\\, and 'preempt 2' typed at its "
    "prompt kills node 2: its stage moves to node 1 and the steps go on",
    "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(73);
  cfg.steps = 400;
  cluster c(cfg);
  auto capture = [] { return tmux("capture-pane -p -t view").output; };
  auto shown = [&](const std::string& re) {
    const std::regex pattern(re);
    for (int i = 0; i < 200; ++i) {
      auto screen = capture();
      std::smatch m;
      if (std::regex_search(screen, m, pattern))
        return m.str(m.size() > 1 ? 1 : 0);
      std::this_thread::sleep_for(50ms);
    }
    return std::string();
  };
  REQUIRE(tmux("new-session -d -s view -x 110 -y 40 'BAMBOO_TOKEN=" + test_token + " " +
               BAMBOO_INSPECT_BIN + " 127.0.0.1:" + c.port + "'")
              .status == 0);
  INFO(capture());
  CHECK_FALSE(shown(R"(PIPELINE  STAGE  NODE  SHADOW)").empty());
  CHECK_FALSE(shown("model gpt").empty());
  CHECK_FALSE(shown(R"(\n\s+0\s+2\s+2\s+1\n)").empty()); // stage 2 on node 2, shadow on 1

  REQUIRE(tmux("send-keys -t view 'preempt 2' Enter").status == 0);
  CHECK_FALSE(shown("node 2 preempted: its process is killed").empty());
  CHECK(c.workers[2]->wait_exit(20s) == 128 + SIGKILL);
  CHECK_FALSE(shown(R"(\n\s+2  default\s+lost)").empty());
  CHECK_FALSE(shown(R"(\n\s+0\s+2\s+1\s+)").empty()); // stage 2 now on node 1
  const auto first = std::stol(shown(R"(step (\d+)/400)"));
  std::this_thread::sleep_for(1s);
  const auto later = std::stol(shown(R"(step (\d+)/400)"));
  CHECK(later > first);
  const auto screen = capture();
  INFO(screen);
  CHECK(screen.find("node 2 lost in step") != std::string::npos);

  REQUIRE(tmux("send-keys -t view quit Enter").status == 0);
  for (int i = 0; i < 100 && tmux("has-session -t view").status == 0; ++i)
    std::this_thread::sleep_for(50ms);
  CHECK(tmux("has-session -t view").status != 0); // quit ended the view
  tmux("kill-server");
  c.manager->signal(SIGINT);
  c.manager->wait_exit(30s);
}

TEST_CASE(
    "bamboo-inspect --json runs an operator's command and answers it\\, and refuses "
    "a command for a node that is not a member",
    "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(75);
  cfg.steps = 400;
  cluster c(cfg);
  auto bad = run_command("BAMBOO_TOKEN=" + test_token + " " + BAMBOO_INSPECT_BIN +
                         " --json 127.0.0.1:" + c.port + " notice 9");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("{\"ok\":false,\"answer\":\"node 9 is not a member") !=
        std::string::npos);
  auto typo = run_command("BAMBOO_TOKEN=" + test_token + " " + BAMBOO_INSPECT_BIN +
                          " --json 127.0.0.1:" + c.port + " preempt two");
  CHECK(typo.output.find("'two' is not a node number") != std::string::npos);
  auto notice = run_command("BAMBOO_TOKEN=" + test_token + " " + BAMBOO_INSPECT_BIN +
                            " --json 127.0.0.1:" + c.port + " notice 3");
  INFO(notice.output);
  CHECK(notice.status == 0);
  CHECK(notice.output.find("{\"ok\":true,\"answer\":\"node 3 has a preemption notice") !=
        std::string::npos);
  // The notice is a SIGTERM's: node 3 hands its stage over at a step boundary and leaves.
  CHECK(c.workers[3]->wait_exit(30s) == 0);
  CHECK_FALSE(c.manager->wait_for("node 3 has a preemption notice", 10s).empty());
  c.manager->signal(SIGINT);
  c.manager->wait_exit(30s);
}
