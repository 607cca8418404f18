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

} // namespace

TEST_CASE("bamboo-inspect --json shows which node runs each stage and shadow\\, the "
          "generation and the step\\, before and after a worker is killed",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(71);
  cfg.steps = 60;
  scratch_dir dir;
  child manager(dir, "manager",
                process_run::manager_args(cfg, dir.file("metrics.csv"),
                                          dir.file("digests.csv"), {}),
                test_token);
  const auto port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  std::vector<std::unique_ptr<child>> workers;
  for (int w = 0; w < 4; ++w) { // one at a time: worker w is node w
    workers.push_back(std::make_unique<child>(
        dir, "w" + std::to_string(w),
        std::vector<std::string>{BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port},
        test_token));
    REQUIRE(workers.back()->wait_for(R"(joined as node (\d+))", 20s) ==
            std::to_string(w));
  }
  REQUIRE_FALSE(manager.wait_for(R"(step 3 \()", 30s).empty());

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
  CHECK(manager.wait_exit(60s) == 0);
  // The run's own record agrees: the snapshots' steps committed in their generations.
  const auto m = read_metrics(dir.file("metrics.csv"));
  REQUIRE(m.losses.size() == 60);
  CHECK(std::stol(field(after.output, "step")) > std::stol(field(before.output, "step")));
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
