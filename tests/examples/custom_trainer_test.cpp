// A trainer's own binary in every role (bamboo::main): the custom trainer
// example trains its convolutional model across processes, each of them that
// binary, through a kill -9, to the bits of its one-stage run; a worker that
// does not build the manager's model is refused by name at join.
// LibTorch first: its glog macros would replace Catch's CHECK otherwise.
#include <ATen/ATen.h>

#include "tests/examples/process_run.hpp"

#include "tests/run_command.hpp"

using namespace bamboo;
using namespace bamboo::test;

namespace {

const std::vector<std::string> conv_run{"--steps", "8", "--lr",      "3e-3",
                                        "--seed",  "5", "--threads", "1"};

std::string joined(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args)
    out += (out.empty() ? "" : " ") + a;
  return out;
}

} // namespace

TEST_CASE("a custom trainer's own binary trains its model across processes through a "
          "kill -9 of a worker - with the losses of its one-stage run bit for bit",
          "[examples]") {
  no_leftovers guard;
  scratch_dir dir;
  auto one = conv_run;
  one.insert(one.end(), {"--stages", "1", "--quiet", "--metrics", dir.file("one.csv")});
  auto local = run_command(std::string(BAMBOO_CUSTOM_TRAINER_BIN) + " " + joined(one));
  INFO(local.output);
  REQUIRE(local.status == 0);
  const auto reference = read_metrics(dir.file("one.csv"));
  REQUIRE(reference.losses.size() == 8);
  CHECK(reference.losses.back() < reference.losses.front()); // it learns

  std::vector<std::string> procs{
      BAMBOO_CUSTOM_TRAINER_BIN, "--processes", "--stages",           "3", "--preempt",
      "node=1@step=4",           "--metrics",   dir.file("procs.csv")};
  procs.insert(procs.end(), conv_run.begin(), conv_run.end());
  child run(dir, "procs", procs, test_token);
  REQUIRE(run.wait_exit(90s) == 0);
  const auto log = run.log();
  INFO(log);
  // The manager and the workers were this binary, with its model.
  CHECK(log.find("conv-classifier run: 1 pipeline(s) of 3 stage(s)") !=
        std::string::npos);
  CHECK(log.find("1 preemption(s) survived") != std::string::npos);
  const auto m = read_metrics(dir.file("procs.csv"));
  CHECK(m.losses == reference.losses);
  REQUIRE(m.events.size() == 8);
  CHECK(m.events[4] == "preempted+failover"); // the kill -9 as step 4 began
}

TEST_CASE("a worker that does not build the manager's custom model is refused by name at "
          "join - and a custom trainer refuses the built-in models' options",
          "[examples]") {
  no_leftovers guard;
  scratch_dir dir;
  child manager(dir, "manager",
                {BAMBOO_CUSTOM_TRAINER_BIN, "manager", "--stages", "2", "--steps", "2",
                 "--join-timeout-s", "20"},
                test_token);
  const auto port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))", 20s);
  REQUIRE_FALSE(port.empty());
  child stock(dir, "stock", {BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port},
              test_token);
  CHECK(stock.wait_exit(20s) == 2);
  CHECK(stock.log().find("refused: model 'conv-classifier' is not registered on this "
                         "worker (it builds gpt and bert only") != std::string::npos);
  CHECK(manager.wait_for("refused a join from .*: model 'conv-classifier'").size() > 0);
  manager.signal(SIGINT);
  manager.wait_exit(20s);

  auto bad = run_command(std::string(BAMBOO_CUSTOM_TRAINER_BIN) + " --layers 8");
  CHECK(bad.status == 2);
  CHECK(bad.output.find("--layers is for the built-in models: this program trains its "
                        "own model 'conv-classifier'") != std::string::npos);
}
