// bamboo-inspect against a local cluster of processes: its --json snapshots
// match the run (the plan of each stage and shadow, generation, step) before
// and after a worker is killed, --watch streams the events, and bad input
// (a wrong token, nobody listening, no terminal) ends with one clear line.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include "tests/run_command.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>

using namespace bamboo;
using namespace bamboo::test;

namespace {

std::string field(const std::string& json, const std::string& name) {
  std::smatch m;
  const std::regex re("\"" + name + "\":(\\[[^\\]]*\\]|\"[^\"]*\"|true|false|[-0-9.e]+)");
  return std::regex_search(json, m, re) ? m.str(1) : "";
}

// The operator token the test managers take (--operator-token-file): commands
// need it besides the cluster token.
const std::string test_operator_token = "a-test-operator-token-0123456789";
const std::string with_operator = "BAMBOO_OPERATOR_TOKEN=" + test_operator_token + " ";

std::string operator_file(scratch_dir& dir) {
  const auto path = dir.file("operator-token");
  std::ofstream(path) << test_operator_token << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

outcome inspect(const std::string& port, const std::string& args,
                const std::string& token = test_token) {
  return run_command("BAMBOO_TOKEN=" + token + " " + BAMBOO_INSPECT_BIN + " " + args +
                     " 127.0.0.1:" + port);
}

// A manager training `cfg` and its 4 workers, started one at a time (worker w
// is node w), with the test token, until step 3 has committed. With
// `checkpoints`, the manager may take checkpoints (into dir/ck).
struct cluster {
  scratch_dir dir;
  std::unique_ptr<child> manager;
  std::vector<std::unique_ptr<child>> workers;
  std::string port;
  explicit cluster(const train_config& cfg, bool checkpoints = false) {
    std::vector<std::string> extra{"--operator-token-file", operator_file(dir)};
    if (checkpoints)
      extra.insert(extra.end(),
                   {"--checkpoint-dir", dir.file("ck"), "--checkpoint-every", "100000"});
    manager =
        std::make_unique<child>(dir, "manager",
                                process_run::manager_args(cfg, dir.file("metrics.csv"),
                                                          dir.file("digests.csv"), extra),
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

// A manager with no run (admission only): observers attach, nothing trains.
struct idle_manager {
  scratch_dir dir;
  child proc{dir, "manager", {BAMBOO_MANAGER_BIN, "--port", "0"}, test_token};
  std::string port;
  idle_manager() {
    port = proc.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
    REQUIRE_FALSE(port.empty());
  }
};

// tmux on a server of its own, for the view's tests.
outcome tmux(const std::string& args) {
  return run_command("tmux -L bamboo-test-" + std::to_string(getpid()) + " " + args);
}

// Polls `get` (a snapshot, a screen) until it matches `re`; the match (its
// first group if any), or empty after `tries` x 100 ms.
template <class Get>
std::string eventually(Get get, const std::string& re, int tries = 200) {
  const std::regex pattern(re);
  for (int i = 0; i < tries; ++i) {
    const auto text = get();
    std::smatch m;
    if (std::regex_search(text, m, pattern))
      return m.str(m.size() > 1 ? 1 : 0);
    std::this_thread::sleep_for(100ms);
  }
  return {};
}

// One command's JSON answer, as an operator (the test tokens, or the options).
outcome order(const std::string& port, const std::string& words,
              const std::string& token_option = "") {
  return run_command(
      (token_option.empty() ? "BAMBOO_TOKEN=" + test_token + " " + with_operator : "") +
      BAMBOO_INSPECT_BIN + " " + token_option + " --json 127.0.0.1:" + port + " " +
      words);
}

} // namespace

TEST_CASE("bamboo-inspect --json shows which node runs each stage and shadow - the "
          "generation and the step - before and after a worker is killed",
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

TEST_CASE("bamboo-inspect refuses a wrong token - says when nobody listens - and needs "
          "--json or --watch when its output is not a terminal",
          "[examples]") {
  no_leftovers guard;
  idle_manager idle;
  auto& manager = idle.proc;
  const auto& port = idle.port;
  auto wrong = inspect(port, "--json", "another-cluster-token-0123456789");
  CHECK(wrong.status == 2);
  // The door takes no proof with another token: CAF never hears of it.
  INFO(wrong.output);
  CHECK(wrong.output.find("refused this process's proof of the cluster token (a wrong "
                          "token") != std::string::npos);
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

TEST_CASE("the full-screen view in tmux shows the cluster - and 'preempt 2' typed at its "
          "prompt kills node 2 - its stage moves to node 1 and the steps go on",
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
               with_operator + BAMBOO_INSPECT_BIN + " 127.0.0.1:" + c.port + "'")
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

TEST_CASE("bamboo-inspect --json runs an operator's command and answers it - refuses "
          "it to an observer without the operator token or with a wrong one - and "
          "refuses a command for a node that is not a member",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(75);
  cfg.steps = 400;
  cluster c(cfg);
  // The cluster token alone watches: a command is refused, and nothing happens.
  auto watcher = run_command("BAMBOO_TOKEN=" + test_token + " " + BAMBOO_INSPECT_BIN +
                             " --json 127.0.0.1:" + c.port + " preempt 2");
  INFO(watcher.output);
  CHECK(watcher.status == 2);
  CHECK(watcher.output.find("{\"ok\":false,\"answer\":\"refused: commands need the "
                            "operator token") != std::string::npos);
  CHECK_FALSE(c.manager->wait_for("an observer without the operator token", 10s).empty());
  auto wrong =
      run_command("BAMBOO_TOKEN=" + test_token +
                  " BAMBOO_OPERATOR_TOKEN=not-the-operator-token-0123 " +
                  BAMBOO_INSPECT_BIN + " --json 127.0.0.1:" + c.port + " preempt 2");
  INFO(wrong.output);
  CHECK(wrong.status == 2);
  CHECK(wrong.output.find("refused: wrong operator token") != std::string::npos);
  std::this_thread::sleep_for(500ms);
  CHECK(c.workers[2]->running());
  auto bad =
      run_command("BAMBOO_TOKEN=" + test_token + " " + with_operator +
                  BAMBOO_INSPECT_BIN + " --json 127.0.0.1:" + c.port + " notice 9");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("{\"ok\":false,\"answer\":\"node 9 is not a member") !=
        std::string::npos);
  auto typo =
      run_command("BAMBOO_TOKEN=" + test_token + " " + with_operator +
                  BAMBOO_INSPECT_BIN + " --json 127.0.0.1:" + c.port + " preempt two");
  CHECK(typo.output.find("'two' is not a node number") != std::string::npos);
  auto notice =
      run_command("BAMBOO_TOKEN=" + test_token + " " + with_operator +
                  BAMBOO_INSPECT_BIN + " --json 127.0.0.1:" + c.port + " notice 3");
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

TEST_CASE("an operator pauses a run - takes a checkpoint - switches redundancy to "
          "eager and drains a node through bamboo-inspect - and the losses stay those "
          "of the undisturbed run bit for bit",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(77);
  cfg.steps = 300;
  cluster c(cfg, /*checkpoints=*/true);
  auto& manager = *c.manager;
  auto snap = [&] { return inspect(c.port, "--json").output; };

  auto paused = order(c.port, "pause");
  INFO(paused.output);
  CHECK(paused.output.find("{\"ok\":true,\"answer\":\"paused") != std::string::npos);
  const auto held = manager.wait_for(R"(paused before step (\d+) by an operator)", 20s);
  REQUIRE_FALSE(held.empty());
  const long k = std::stol(held);
  auto s1 = snap();
  INFO(s1);
  CHECK(field(s1, "paused") == "true");
  CHECK(std::stol(field(s1, "step")) == k - 1);
  // One row per actor: the manager's process and every worker's.
  CHECK(s1.find("\"kind\":\"manager\",\"node\":-1,\"stage\":-1,\"state\":\"paused\"") !=
        std::string::npos);
  CHECK(s1.find("\"kind\":\"gateway\",\"node\":-1") != std::string::npos);
  for (int n = 0; n < 4; ++n) {
    const auto node = std::to_string(n);
    CHECK(s1.find("\"kind\":\"agent\",\"node\":" + node +
                  ",\"stage\":-1,\"state\":"
                  "\"assigned\"") != std::string::npos);
    CHECK(s1.find("\"kind\":\"stage\",\"node\":" + node + ",\"stage\":" + node +
                  ",\"state\":\"active\",\"doing\":\"step " + std::to_string(k - 1) +
                  " committed, idle\"") != std::string::npos);
    CHECK(s1.find("\"kind\":\"shadow\",\"node\":" + node +
                  ",\"stage\":" + std::to_string((n + 1) % 4) +
                  ",\"state\":\"shadow\"") != std::string::npos);
  }
  std::this_thread::sleep_for(600ms);
  CHECK(std::stol(field(snap(), "step")) == k - 1); // no step while paused

  CHECK(order(c.port, "checkpoint").output.find("\"ok\":true") != std::string::npos);
  CHECK_FALSE(
      eventually(snap, "checkpoint of step " + std::to_string(k) + " written").empty());
  CHECK(order(c.port, "redundancy eager").output.find("\"ok\":true") !=
        std::string::npos);
  auto again = order(c.port, "redundancy eager");
  CHECK(again.output.find("{\"ok\":false,\"answer\":\"redundancy is eager already") !=
        std::string::npos);
  CHECK(order(c.port, "resume").output.find("\"ok\":true,\"answer\":\"resumed\"") !=
        std::string::npos);
  CHECK_FALSE(manager
                  .wait_for("a new plan before step " + std::to_string(k) +
                                ": an operator set redundancy to eager",
                            20s)
                  .empty());
  CHECK_FALSE(eventually(snap, R"("redundancy":"eager")").empty());

  auto drain = order(c.port, "drain 3");
  INFO(drain.output);
  CHECK(drain.output.find("{\"ok\":true,\"answer\":\"node 3 drains") !=
        std::string::npos);
  CHECK(c.workers[3]->wait_exit(30s) == 0); // its stage handed over, then let go
  CHECK_FALSE(manager.wait_for("node 3 drains", 10s).empty());
  const int status = manager.wait_exit(120s);
  INFO(manager.log());
  REQUIRE(status == 0);
  const auto m = read_metrics(c.dir.file("metrics.csv"));
  check_losses(m, embedded_reference(cfg));
}

TEST_CASE("bamboo-train --inspect-port lets bamboo-inspect watch an embedded run and "
          "preempt a node's actors while it is paused - the node fails over on resume "
          "and the losses stay those of the run without it",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(79);
  cfg.steps = 400;
  scratch_dir dir;
  auto args = process_run::args(cfg, dir.file("metrics.csv"), dir.file("digests.csv"),
                                {"--inspect-port", "0"});
  args.erase(args.begin() + 1); // embedded: no --processes
  child run(dir, "train", args, test_token);
  const auto token_file = run.wait_for(R"(bamboo-inspect --token-file (\S+) )", 30s);
  const auto port = run.wait_for(R"(bamboo-inspect --token-file \S+ 127\.0\.0\.1:(\d+))");
  const auto operator_token_file = run.wait_for(R"(add --operator-token-file (\S+)\))");
  REQUIRE_FALSE(port.empty());
  REQUIRE_FALSE(operator_token_file.empty());
  REQUIRE_FALSE(run.wait_for(R"(step 3 \()", 30s).empty());
  const auto with =
      "--token-file " + token_file + " --operator-token-file " + operator_token_file;
  CHECK(order(port, "pause", with).output.find("\"ok\":true") != std::string::npos);
  const auto held = run.wait_for(R"(paused before step (\d+) by an operator)", 20s);
  REQUIRE_FALSE(held.empty());
  auto s = run_command(std::string(BAMBOO_INSPECT_BIN) + " " + with +
                       " --json 127.0.0.1:" + port)
               .output;
  INFO(s);
  CHECK(field(s, "paused") == "true");
  CHECK(field(s, "owners") == "[0,1,2,3]");
  for (const char* kind : {"stage", "shadow", "detector"})
    for (int n = 0; n < 4; ++n)
      CHECK(s.find(std::string("\"kind\":\"") + kind +
                   "\",\"node\":" + std::to_string(n)) != std::string::npos);
  CHECK(s.find("\"kind\":\"manager\",\"node\":-1,\"stage\":-1,\"state\":\"paused\"") !=
        std::string::npos);

  auto kill = order(port, "preempt 2", with);
  INFO(kill.output);
  CHECK(kill.output.find("{\"ok\":true,\"answer\":\"node 2 preempted: its actors are "
                         "killed\"}") != std::string::npos);
  CHECK_FALSE(run.wait_for("node 2 lost while paused", 20s).empty());
  CHECK(order(port, "preempt 7", with).output.find("node 7 is not in the plan") !=
        std::string::npos);
  // A worker is refused by name: the run's nodes are this process's actors.
  auto worker = run_command(std::string(BAMBOO_WORKER_BIN) + " --token-file " +
                            token_file + " --manager 127.0.0.1:" + port);
  CHECK(worker.status == 2);
  CHECK(worker.output.find("takes observers (bamboo-inspect), not workers") !=
        std::string::npos);
  CHECK(order(port, "resume", with).output.find("\"ok\":true") != std::string::npos);
  CHECK_FALSE(run.wait_for("failover: stage 2 moves to node 1", 20s).empty());
  auto after = run_command(std::string(BAMBOO_INSPECT_BIN) + " " + with +
                           " --json 127.0.0.1:" + port)
                   .output;
  INFO(after);
  CHECK(after.find("\"node\":2,\"zone\":\"default\",\"state\":\"lost\"") !=
        std::string::npos);
  CHECK(after.find("\"node\":1,\"zone\":\"default\",\"state\":\"degraded\"") !=
        std::string::npos);
  REQUIRE(run.wait_exit(120s) == 0);
  const auto m = read_metrics(dir.file("metrics.csv"));
  check_losses(m, embedded_reference(cfg));
  CHECK(m.events.at(static_cast<std::size_t>(std::stol(held))) == "preempted+failover");
}

TEST_CASE("the full-screen view refuses a terminal too small - and ends with one line "
          "when the manager dies while it is attached",
          "[examples]") {
  no_leftovers guard;
  idle_manager idle;
  auto& manager = idle.proc;
  const auto& port = idle.port;
  auto view = [&](const std::string& name, int cols, int rows) {
    return tmux("new-session -d -s " + name + " -x " + std::to_string(cols) + " -y " +
                std::to_string(rows) + " 'BAMBOO_TOKEN=" + test_token + " " +
                BAMBOO_INSPECT_BIN + " --timeout-s 3 127.0.0.1:" + port +
                "; echo EXIT=$?; sleep 60'");
  };
  auto screen = [](const std::string& name) {
    return [name] { return tmux("capture-pane -p -J -t " + name).output; };
  };
  REQUIRE(view("small", 60, 15).status == 0);
  CHECK_FALSE(eventually(screen("small"), "EXIT=2").empty());
  const auto small = screen("small")();
  INFO(small);
  CHECK(small.find("the terminal is too small (60x15; the view needs 72x20)") !=
        std::string::npos);

  REQUIRE(view("big", 100, 30).status == 0);
  CHECK_FALSE(eventually(screen("big"), "NODE  ACTOR").empty());
  REQUIRE(manager.signal(SIGKILL));
  CHECK_FALSE(eventually(screen("big"), "EXIT=1").empty());
  const auto gone = screen("big")();
  INFO(gone);
  CHECK(gone.find("bamboo-inspect: the manager is gone") != std::string::npos);
  CHECK(gone.find("NODE  ACTOR") == std::string::npos); // the terminal was restored
  tmux("kill-server");
  manager.wait_exit(10s);
}

TEST_CASE("an embedded run keeps its token files under $XDG_RUNTIME_DIR - takes the "
          "user's cluster token from BAMBOO_TOKEN and the operator's from a file - and "
          "removes them when SIGTERM ends it",
          "[examples]") {
  no_leftovers guard;
  auto cfg = small_gpt(81);
  cfg.steps = 100000; // ended by the signal
  scratch_dir dir;
  const auto runtime = dir.file("runtime");
  std::filesystem::create_directory(runtime);
  ::chmod(runtime.c_str(), 0700);
  auto args = process_run::args(
      cfg, dir.file("metrics.csv"), dir.file("digests.csv"),
      {"--inspect-port", "0", "--operator-token-file", operator_file(dir)});
  args.erase(args.begin() + 1); // embedded: no --processes
  std::string line = "XDG_RUNTIME_DIR=" + runtime + " exec";
  for (const auto& a : args)
    line += " '" + a + "'";
  child run(dir, "train", {"/bin/sh", "-c", line}, test_token);
  const auto token_file = run.wait_for(R"(bamboo-inspect --token-file (\S+) )", 30s);
  const auto port = run.wait_for(R"(bamboo-inspect --token-file \S+ 127\.0\.0\.1:(\d+))");
  const auto op_file = run.wait_for(R"(add --operator-token-file (\S+)\))");
  REQUIRE_FALSE(port.empty());
  INFO(token_file);
  CHECK(token_file.rfind(runtime + "/bamboo-token-", 0) == 0);
  std::string read_back, op_back;
  std::getline(std::ifstream(token_file), read_back);
  std::getline(std::ifstream(op_file), op_back);
  CHECK(read_back == test_token);
  CHECK(op_back == test_operator_token);
  // The user's tokens work as they are: a command with both.
  auto paused = order(port, "pause");
  CHECK(paused.output.find("\"ok\":true") != std::string::npos);
  REQUIRE(run.signal(SIGTERM));
  CHECK(run.wait_exit(30s) == 128 + SIGTERM);
  const auto token_dir = std::filesystem::path(token_file).parent_path();
  CHECK_FALSE(std::filesystem::exists(token_dir));
  CHECK(std::filesystem::is_empty(runtime));
}
